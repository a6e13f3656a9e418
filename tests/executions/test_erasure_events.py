"""Erasure and status webhooks: the person's unfinished instances are reported
cancelled (``recipient erased``), and every webhook message about them or about the
person - delivered or pending - keeps its type, id and sequence but no longer names
them, nor do their receivers' answers; nobody else's messages change."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.erasure import ERASED, recipient_erase
from recipients.preferences import opt_out
from status_webhooks.models import WebhookAttempt, WebhookMessage
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from tests.webhook_events import kicks, sent_to, subscribe, types_in_order
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.django_db,
    pytest.mark.usefixtures("kicks", "dispatched"),
]
__all__ = ["kicks"]

# An email and an SMS to the instance's recipient.
TO_THE_RECIPIENT = {
    "entry_node_id": "hello",
    "nodes": [
        {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
        {"id": "text", "type": "sms", "config": {"body": "Hi"}},
    ],
    "edges": [{"from": "hello", "to": "text"}],
}
EVERYTHING = ("delivery.*", "instance.completed", "instance.cancelled", "recipient.unsubscribed")


def test_erasure_reports_the_cancellations_and_leaves_no_trace_of_the_person():
    endpoint = subscribe(*EVERYTHING)
    ada = RecipientFactory(id="ada-7", email="ada@example.com", phone="+15550000001")
    bob = RecipientFactory(id="bob-8", email="bob@example.com", phone="+15550000002")
    workflow = WorkflowFactory(definition=TO_THE_RECIPIENT)
    done = TriggerInstanceFactory(workflow=workflow, recipient=ada, payload={})
    for _ in range(2):
        engine.step_execute(instance_id=done.pk)
        TriggerInstance.objects.filter(pk=done.pk).update(available_at=timezone.now())
    later = TriggerInstanceFactory(
        workflow=workflow,
        recipient=ada,
        payload={},
        available_at=timezone.now() + timedelta(hours=1),
    )
    theirs = TriggerInstanceFactory(workflow=workflow, recipient=bob, payload={})
    engine.step_execute(instance_id=theirs.pk)
    opt_out(recipient_id="ada", scope="channels.sms", source="api")  # no such person: none
    opt_out(recipient_id="ada-7", scope="channels.sms", source="api")
    opt_out(recipient_id="bob-8", scope="channels.sms", source="api")
    # A receiver that echoed the body (its answer is kept as an excerpt).
    for message in WebhookMessage.objects.filter(endpoint=endpoint):
        WebhookAttempt.objects.create(
            message=message,
            attempted_at=timezone.now(),
            status_code=200,
            response_excerpt=f"got {json.dumps(message.data)} for ada@example.com",
        )
    before_bob = {m.pk: m.data for m in WebhookMessage.objects.filter(data__icontains="bob")}

    recipient_erase(recipient_id="ada-7", actor="dpo")

    assert types_in_order(endpoint, later.pk) == [(1, "instance.cancelled")]
    cancelled = sent_to(endpoint, instance_id=later.pk)[0]
    assert cancelled.data["reason"] == "recipient erased"
    assert cancelled.data["recipient"] == ERASED
    assert [t for _, t in types_in_order(endpoint, done.pk)] == [
        "delivery.sent",
        "delivery.sent",
        "instance.completed",
    ]
    everything = json.dumps(
        [m.data for m in WebhookMessage.objects.exclude(data__icontains="bob")]
        + list(
            WebhookAttempt.objects.filter(message__data__icontains=ERASED).values_list(
                "response_excerpt", flat=True
            )
        )
    )
    assert "ada-7" not in everything and "ada@example.com" not in everything
    assert "+15550000001" not in everything
    (unsubscribed,) = sent_to(endpoint, type="recipient.unsubscribed", data__recipient=ERASED)
    assert unsubscribed.data["scope"] == "channels.sms"
    # Bob's messages are as they were.
    after_bob = {m.pk: m.data for m in WebhookMessage.objects.filter(data__icontains="bob")}
    assert after_bob == before_bob and after_bob
    assert TriggerInstance.objects.get(pk=later.pk).status == TriggerStatus.CANCELLED
