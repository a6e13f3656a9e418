"""The delay node: a delay waits until its time (``duration`` or ``until``) before the
next node; one at the end of a workflow is waited for before the instance completes,
one already over continues at once, and run-now ends it. Engine-level: runs on SQLite
and PostgreSQL (marker both_databases)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import instance_run_now, trigger_create

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _create(wf, key="k"):
    return trigger_create(workflow=wf, idempotency_key=key, payload=dict(PAYLOAD)).instance


def _fresh(instance) -> TriggerInstance:
    return TriggerInstance.objects.get(pk=instance.pk)


def _time_passes(instance) -> None:
    """The delay's time has come (its message arrives at the deadline)."""
    now = timezone.now()
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=now, wait_deadline=now)


def _last_reason(instance) -> str:
    return TriggerStatusChange.objects.filter(instance=instance).latest("id").reason


def trailing_delay_definition(**delay: str) -> dict:
    """An email, then a delay with nothing after it."""
    definition = email_sms_definition()
    definition["nodes"] = [
        definition["nodes"][0],
        {"id": "linger", "type": "delay", "config": delay or {"duration": "1h"}},
    ]
    definition["edges"] = [{"from": "hello", "to": "linger"}]
    return definition


# --- a delay at the end of the workflow -----------------------------------------------


def test_a_delay_at_the_end_is_waited_for_before_the_instance_completes(dispatched):
    instance = _create(WorkflowFactory(definition=trailing_delay_definition()))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    parked = _fresh(instance)
    assert parked.status == S.ENQUEUED and parked.finished_at is None
    assert parked.current_node_id == "linger"
    assert parked.available_at > timezone.now() + timedelta(minutes=59)
    assert parked.wait_deadline == parked.available_at
    waiting = parked.waiting_on(timezone.now())
    assert waiting is not None and (waiting.kind, waiting.ends_workflow) == ("delay", True)
    # Not yet due: nothing claims it.
    assert engine.step_execute(instance_id=instance.pk).startswith("skipped")
    _time_passes(instance)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    done = _fresh(instance)
    assert done.status == S.COMPLETED and done.current_node_id is None
    assert done.wait_deadline is None
    rows = list(StepExecutionLog.objects.filter(trigger=instance, node_id="linger"))
    assert [(r.parked, r.success) for r in rows] == [(True, True), (False, True)]


def test_a_delay_at_the_end_that_is_already_over_completes_at_once(dispatched):
    past = (timezone.now() - timedelta(days=1)).isoformat()
    instance = _create(WorkflowFactory(definition=trailing_delay_definition(until=past)))
    engine.step_execute(instance_id=instance.pk)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert _fresh(instance).status == S.COMPLETED


def test_run_now_ends_a_delay_at_the_end_and_the_instance_completes(dispatched):
    instance = _create(WorkflowFactory(definition=trailing_delay_definition()))
    engine.step_execute(instance_id=instance.pk)
    engine.step_execute(instance_id=instance.pk)
    assert instance_run_now(instance_id=instance.pk, actor="olive", reason="customer asked")
    reason = _last_reason(instance)
    assert "delay at node linger skipped" in reason and "customer asked" in reason
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
