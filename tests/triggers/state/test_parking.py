"""Instances parked at a gate: woken when the gate opens, a closed batch's
parked members completed set-based, run-now releasing a gate, cancellation announced."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers import state
from triggers.models import ParkedOn, TriggerStatus, TriggerStatusChange

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
S = TriggerStatus


def _parked(workflow, parked_on: str, *, in_hours: float = 1, node: str = "hello"):
    later = timezone.now() + timedelta(hours=in_hours)
    return TriggerInstanceFactory(
        workflow=workflow,
        current_node_id=node,
        available_at=later,
        wait_deadline=later,
        parked_on=parked_on,
    )


def test_waking_makes_instances_parked_on_the_gate_due_and_dispatches_them(dispatched):
    wf = WorkflowFactory()
    batch = _parked(wf, ParkedOn.BATCH)
    window = _parked(wf, ParkedOn.SEND_WINDOW)
    before = timezone.now()
    woken = state.wake_parked(instance_ids=[batch.pk, window.pk], parked_on=ParkedOn.BATCH)
    assert woken == 1
    batch.refresh_from_db()
    window.refresh_from_db()
    assert before <= batch.available_at <= timezone.now()
    assert window.available_at > timezone.now() + timedelta(minutes=50)
    assert dispatched == [(str(batch.pk), None)]


def test_waking_leaves_a_finished_instance_alone(dispatched):
    gone = _parked(WorkflowFactory(), ParkedOn.BATCH)
    gone.status = S.CANCELLED
    gone.save()
    assert state.wake_parked(instance_ids=[gone.pk], parked_on=ParkedOn.BATCH) == 0
    assert dispatched == []


def test_completing_a_batchs_members_ends_those_still_parked_with_audit_rows():
    wf = WorkflowFactory()
    members = [_parked(wf, ParkedOn.BATCH) for _ in range(3)]
    cancelled = _parked(wf, ParkedOn.BATCH)
    cancelled.status = S.CANCELLED
    cancelled.save()
    elsewhere = _parked(wf, ParkedOn.BATCH, node="other")
    ids = [m.pk for m in members] + [cancelled.pk, elsewhere.pk]

    done = state.complete_parked(
        instance_ids=ids, node_id="hello", reason="batched into batch b1", actor="engine"
    )

    assert done == 3
    for member in members:
        member.refresh_from_db()
        assert (member.status, member.current_node_id, member.parked_on) == (S.COMPLETED, None, "")
        assert member.finished_at is not None
        change = TriggerStatusChange.objects.get(instance=member)
        assert (change.from_status, change.to_status, change.reason) == (
            S.ENQUEUED,
            S.COMPLETED,
            "batched into batch b1",
        )
    cancelled.refresh_from_db()
    elsewhere.refresh_from_db()
    assert cancelled.status == S.CANCELLED
    assert elsewhere.status == S.ENQUEUED
    # Running it again changes nothing: the close may be repeated by a recovered worker.
    assert state.complete_parked(instance_ids=ids, node_id="hello", reason="x", actor="e") == 0


@pytest.mark.parametrize(
    "gate, named",
    [
        (ParkedOn.SEND_WINDOW, "send window"),
        (ParkedOn.THROTTLE, "throttle"),
        (ParkedOn.BATCH, "batch"),
    ],
)
def test_run_now_releases_a_gate_once_and_says_which(dispatched, gate, named):
    instance = _parked(WorkflowFactory(), gate)
    assert state.run_now(instance_id=instance.pk, actor="admin:ops")
    instance.refresh_from_db()
    assert instance.parked_on == ParkedOn.OVERRIDE
    assert instance.available_at <= timezone.now()
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert named in change.reason and "released" in change.reason
    assert dispatched == [(str(instance.pk), None)]


def test_an_instance_parked_on_a_gate_says_so():
    now = timezone.now()
    instance = _parked(WorkflowFactory(), ParkedOn.SEND_WINDOW, in_hours=2)
    waiting = instance.waiting_on(now)
    assert waiting is not None
    assert (waiting.kind, waiting.until) == ("send_window", instance.wait_deadline)


def test_every_way_of_cancelling_announces_the_cancelled_instances():
    heard: list[list] = []

    def listener(sender, instance_ids, **kwargs):
        heard.append(list(instance_ids))

    state.instances_cancelled.connect(listener)
    try:
        wf = WorkflowFactory()
        one = TriggerInstanceFactory(workflow=wf)
        many = [TriggerInstanceFactory(workflow=wf) for _ in range(2)]
        assert state.cancel(instance_id=one.pk, from_status=S.ENQUEUED, reason="x", actor="t")
        assert state.cancel_many(instance_ids=[m.pk for m in many], reason="x", actor="t") == 2
    finally:
        state.instances_cancelled.disconnect(listener)
    assert [one.pk] in heard
    assert sorted(map(str, sum(heard, []))) == sorted(str(i.pk) for i in [one, *many])
