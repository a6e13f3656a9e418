"""The outbox of status events: messages written in the change's transaction, one per
endpoint that wants the event, with per-instance sequence numbers."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction
from django.utils import timezone

from status_webhooks.models import WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers import state
from triggers.models import TriggerStatus

pytestmark = [pytest.mark.django_db]


def _endpoint(**fields) -> WebhookEndpoint:
    fields.setdefault("url", "http://127.0.0.1:9/hook")
    fields.setdefault("event_types", ["instance.completed"])
    return WebhookEndpoint.objects.create(secret="whsec_dGVzdA==", **fields)


@pytest.mark.both_databases
def test_nothing_is_written_when_no_active_endpoint_wants_the_event():
    _endpoint(event_types=["instance.failed"])
    _endpoint(is_active=False)
    assert record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())]) == 0
    assert not WebhookMessage.objects.exists()


@pytest.mark.both_databases
def test_each_event_goes_to_every_endpoint_that_wants_it_with_one_id_and_the_next_sequence():
    one, two = _endpoint(), _endpoint(event_types=["instance.completed", "delivery.*"])
    instance_id = uuid.uuid4()
    with transaction.atomic():
        written = record(
            events=[
                NewEvent(type="delivery.sent", data={"node_id": "a"}, instance_id=instance_id),
                NewEvent(type="instance.completed", instance_id=instance_id),
            ]
        )
    assert written == 3
    sent = WebhookMessage.objects.get(type="delivery.sent")
    assert sent.endpoint == two and sent.sequence == 1
    assert sent.data == {"node_id": "a", "instance_id": str(instance_id), "sequence": 1}
    completed = WebhookMessage.objects.filter(type="instance.completed")
    assert {m.endpoint for m in completed} == {one, two}
    assert {(m.sequence, m.event_id) for m in completed} == {(2, completed[0].event_id)}
    record(events=[NewEvent(type="instance.completed", instance_id=instance_id)])
    assert WebhookMessage.objects.filter(sequence=3).count() == 2


@pytest.mark.both_databases
def test_an_endpoint_narrowed_to_workflows_gets_only_theirs_and_workflowless_events():
    narrowed = _endpoint(
        workflows=["welcome"], event_types=["instance.completed", "recipient.unsubscribed"]
    )
    record(
        events=[
            NewEvent(type="instance.completed", instance_id=uuid.uuid4(), workflow_key="other"),
            NewEvent(type="instance.completed", instance_id=uuid.uuid4(), workflow_key="welcome"),
            NewEvent(type="recipient.unsubscribed", data={"recipient": "r1"}),
        ]
    )
    got = WebhookMessage.objects.filter(endpoint=narrowed)
    assert sorted((m.type, m.workflow_key) for m in got) == [
        ("instance.completed", "welcome"),
        ("recipient.unsubscribed", ""),
    ]
    assert got.get(type="recipient.unsubscribed").sequence is None


@pytest.mark.both_databases
def test_an_event_of_a_rolled_back_transaction_is_never_written():
    _endpoint()
    with pytest.raises(RuntimeError), transaction.atomic():
        record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
        raise RuntimeError("the change failed")
    assert not WebhookMessage.objects.exists()


def _processing(instance):
    assert state.claim(instance_id=instance.pk, worker="test", now=timezone.now())
    return instance


def _complete_with_event(instance, workflow_key: str) -> bool:
    return state.transition(
        instance_id=instance.pk,
        from_status=TriggerStatus.PROCESSING,
        to_status=TriggerStatus.COMPLETED,
        reason="done",
        actor="test",
        events=[
            NewEvent(
                type="instance.completed",
                data={"status": "completed"},
                instance_id=instance.pk,
                workflow_key=workflow_key,
            )
        ],
    )


@pytest.mark.postgres  # one-statement transitions
def test_a_transition_statement_writes_its_event_only_when_it_applies():
    endpoint = _endpoint()
    workflow = WorkflowFactory()
    instance = _processing(TriggerInstanceFactory(workflow=workflow))
    record(events=[NewEvent(type="instance.completed", instance_id=instance.pk)])
    assert _complete_with_event(instance, workflow.key) is True
    assert _complete_with_event(instance, workflow.key) is False  # no longer processing
    message = WebhookMessage.objects.get(endpoint=endpoint, sequence=2)
    assert message.data == {"status": "completed", "instance_id": str(instance.pk), "sequence": 2}
    assert message.workflow_key == workflow.key and message.status == "pending"
    assert WebhookMessage.objects.count() == 2


@pytest.mark.postgres  # one-statement transitions
def test_a_transition_statement_reserves_no_sequence_when_no_endpoint_wants_the_event():
    _endpoint(workflows=["someone-else"])
    instance = _processing(TriggerInstanceFactory())
    assert _complete_with_event(instance, instance.workflow.key) is True
    assert not WebhookMessage.objects.exists()
    _endpoint()
    key = instance.workflow.key
    record(events=[NewEvent(type="instance.completed", instance_id=instance.pk, workflow_key=key)])
    assert WebhookMessage.objects.get().sequence == 1
