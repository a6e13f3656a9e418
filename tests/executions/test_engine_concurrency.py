"""A step whose claim the concurrency limit refuses: nothing runs, no attempt
is spent, its message comes back after a short random pause; a paused workflow's
instance gets no such message (resuming sends it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine, sweeper
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from notifyflow import metrics
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus
from workflows.concurrency import Concurrency

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def deferred_count(workflow: str) -> float:
    return (
        metrics.REGISTRY.get_sample_value(
            "notifyflow_concurrency_deferred_total", {"workflow": workflow}
        )
        or 0.0
    )


def test_a_refused_claim_is_sent_again_shortly_without_spending_an_attempt(dispatched):
    workflow = WorkflowFactory(concurrency=Concurrency(limit=1))
    running = TriggerInstanceFactory(workflow=workflow, concurrency_key="")
    TriggerInstance.objects.filter(pk=running.pk).update(
        status=TriggerStatus.PROCESSING,
        lease_token="00000000-0000-0000-0000-000000000001",
        locked_until=running.available_at,
    )
    waiting = TriggerInstanceFactory(
        workflow=workflow, concurrency_key="", dispatched_at=timezone.now() - timedelta(hours=1)
    )
    before = deferred_count(workflow.key)
    assert engine.step_execute(instance_id=waiting.pk) == StepOutcome.DEFERRED_CONCURRENCY
    [(instance_id, countdown)] = dispatched
    assert instance_id == str(waiting.pk)
    assert countdown is not None and 0.2 <= countdown <= 1.0
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempts) == (TriggerStatus.ENQUEUED, 0)
    # Its message is on its way: the sweeper leaves it alone until that one is overdue.
    assert timezone.now() - waiting.dispatched_at < timedelta(minutes=1)
    assert not StepExecutionLog.objects.filter(trigger_id=waiting.pk).exists()
    assert deferred_count(workflow.key) == before + 1


def test_a_paused_workflows_instance_is_not_sent_again(dispatched):
    workflow = WorkflowFactory(concurrency=Concurrency(limit=1))
    instance = TriggerInstanceFactory(workflow=workflow, concurrency_key="")
    workflow.is_paused = True
    workflow.save(update_fields=["is_paused"])
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.SKIPPED_ENQUEUED
    assert dispatched == []


def test_the_sweeper_resends_a_deferred_steps_lost_message(dispatched, settings):
    workflow = WorkflowFactory(concurrency=Concurrency(limit=1))
    TriggerInstanceFactory(
        workflow=workflow,
        concurrency_key="",
        status=TriggerStatus.PROCESSING,
        lease_token="00000000-0000-0000-0000-000000000001",
        locked_until=timezone.now() + timedelta(minutes=5),
    )
    waiting = TriggerInstanceFactory(
        workflow=workflow, concurrency_key="", available_at=timezone.now() - timedelta(hours=1)
    )
    assert engine.step_execute(instance_id=waiting.pk) == StepOutcome.DEFERRED_CONCURRENCY
    dispatched.clear()  # that message is lost
    soon = timezone.now() + timedelta(seconds=1)
    assert sweeper.redispatch_due(now=soon, batch=10) == 0  # it is on its way
    later = timezone.now() + timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S + 1)
    assert sweeper.redispatch_due(now=later, batch=10) == 1
    assert dispatched == [(str(waiting.pk), None)]
