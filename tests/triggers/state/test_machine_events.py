"""The state machine reports every instance that ends (``instance.completed``,
``instance.failed``, ``instance.cancelled``) in the transaction - on PostgreSQL the
statement - of its transition: one message per endpoint that wants it, with the
instance's next sequence; nothing for a transition that did not apply or was rolled
back. Cancelling thousands reports them set-based."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction
from django.utils import timezone

from status_webhooks.models import InstanceSequence, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.factories import (
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
    bulk_instances,
)
from tests.webhook_events import kicks, sent_to, subscribe, types_in_order
from triggers import state
from triggers.models import TriggerStatus
from triggers.services import instance_cancel, instance_cancel_by_key

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db, pytest.mark.usefixtures("kicks")]
S = TriggerStatus
__all__ = ["kicks"]


def processing(**fields):
    instance = TriggerInstanceFactory(**fields)
    claimed = state.claim(instance_id=instance.pk, worker="test", now=timezone.now())
    assert claimed is not None
    return claimed


def complete(instance, *, lease=None) -> bool:
    return state.transition(
        instance_id=instance.pk,
        from_status=S.PROCESSING,
        to_status=S.COMPLETED,
        reason="done",
        actor="test",
        lease_token=lease or instance.lease_token,
    )


def test_an_instance_that_completes_is_reported_once_to_each_endpoint_that_wants_it(
    kicks, django_capture_on_commit_callbacks
):
    one = subscribe("instance.completed")
    two = subscribe("instance.completed", "instance.failed")
    other = subscribe("instance.failed")
    narrowed = subscribe("instance.completed", workflows=["someone-else"])
    person = RecipientFactory(id="ada")
    instance = processing(recipient=person, idempotency_key="order-1")
    with django_capture_on_commit_callbacks(execute=True):
        assert complete(instance) is True
    for endpoint in (one, two):
        (message,) = sent_to(endpoint)
        assert (message.type, message.sequence, message.instance_id) == (
            "instance.completed",
            1,
            instance.pk,
        )
        assert message.data == {
            "instance_id": str(instance.pk),
            "workflow": instance.workflow.key,
            "idempotency_key": "order-1",
            "recipient": "ada",
            "status": "completed",
            "reason": "done",
            "sequence": 1,
        }
    assert sent_to(one)[0].event_id == sent_to(two)[0].event_id
    assert not sent_to(other) and not sent_to(narrowed)
    assert kicks  # the deliverer is started after commit


def test_a_fenced_out_transition_reports_nothing():
    endpoint = subscribe("instance.completed")
    instance = processing()
    assert complete(instance, lease=uuid.uuid4()) is False  # a stale worker's write
    assert not sent_to(endpoint)
    assert complete(instance) is True
    assert complete(instance) is False  # already completed: no second event
    assert [m.sequence for m in sent_to(endpoint)] == [1]


def test_a_rolled_back_transition_reports_nothing():
    endpoint = subscribe("instance.completed")
    instance = processing()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert complete(instance) is True
        raise RuntimeError("the change failed after the transition")
    assert not sent_to(endpoint)
    assert not InstanceSequence.objects.exists()


def test_no_endpoint_means_no_message_and_no_sequence_taken():
    subscribe("instance.failed")
    instance = processing()
    assert complete(instance) is True
    assert not WebhookMessage.objects.exists()
    assert not InstanceSequence.objects.exists()


def test_each_event_of_an_instance_takes_the_next_sequence():
    endpoint = subscribe("instance.completed", "step.skipped")
    instance = processing()
    key = instance.workflow.key
    record(events=[NewEvent(type="step.skipped", instance_id=instance.pk, workflow_key=key)])
    assert complete(instance) is True
    assert types_in_order(endpoint, instance.pk) == [(1, "step.skipped"), (2, "instance.completed")]


def test_a_failure_without_a_caller_built_event_is_reported_from_the_row():
    """The sweeper's failure (retries spent on lost leases) builds no event: the machine
    reads what it needs and reports it all the same."""
    endpoint = subscribe("instance.failed")
    instance = processing(idempotency_key="k-9")
    assert state.transition(
        instance_id=instance.pk,
        from_status=S.PROCESSING,
        to_status=S.FAILED,
        reason="retries exhausted: lease expired",
        actor="sweeper",
        lease_token=instance.lease_token,
    )
    (message,) = sent_to(endpoint)
    assert message.type == "instance.failed"
    assert message.data["idempotency_key"] == "k-9"
    assert message.data["reason"] == "retries exhausted: lease expired"
    assert message.data["recipient"] is None


def test_an_operator_cancel_is_reported_with_its_reason(dispatched):
    endpoint = subscribe("instance.cancelled")
    instance = TriggerInstanceFactory()
    instance_cancel(instance_id=instance.pk, actor="ops", reason="customer asked")
    (message,) = sent_to(endpoint)
    assert (message.type, message.data["status"], message.data["reason"]) == (
        "instance.cancelled",
        "cancelled",
        "customer asked",
    )


def test_cancel_many_reports_each_instance_once_with_its_own_sequence():
    endpoint = subscribe("instance.cancelled", "step.skipped")
    workflow = WorkflowFactory()
    instances = bulk_instances(workflow, {S.ENQUEUED: 500})
    ids = [i.pk for i in instances]
    # Some already have an event: theirs is the next number.
    record(
        events=[
            NewEvent(type="step.skipped", instance_id=pk, workflow_key=workflow.key)
            for pk in ids[:10]
        ]
    )
    assert state.cancel_many(instance_ids=ids, reason="by key", actor="api") == 500
    cancelled = sent_to(endpoint, type="instance.cancelled")
    assert len(cancelled) == 500
    assert {m.instance_id for m in cancelled} == set(ids)
    assert len({m.event_id for m in cancelled}) == 500
    expected = {pk: (2 if pk in ids[:10] else 1) for pk in ids}
    assert {m.instance_id: m.sequence for m in cancelled} == expected
    assert all(m.data["sequence"] == m.sequence for m in cancelled)
    # A second cancel changes nothing and reports nothing.
    assert state.cancel_many(instance_ids=ids, reason="again", actor="api") == 0
    assert len(sent_to(endpoint, type="instance.cancelled")) == 500


def test_cancel_by_key_of_a_fan_out_reports_every_instance_it_cancelled(dispatched):
    endpoint = subscribe("instance.cancelled")
    workflow = WorkflowFactory()
    people = [RecipientFactory() for _ in range(3)]
    for person in people:
        TriggerInstanceFactory(workflow=workflow, idempotency_key="launch", recipient=person)
    result = instance_cancel_by_key(
        workflow=workflow.key, idempotency_key="launch", actor="api", reason="oops"
    )
    assert result.cancelled == 3
    got = sent_to(endpoint)
    assert sorted(m.data["recipient"] for m in got) == sorted(p.pk for p in people)
    assert {m.data["reason"] for m in got} == {"oops"}
