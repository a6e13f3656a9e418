"""Priority lanes against a real worker: a plain ``celery -A notifyflow
worker`` consumes every lane, and a critical step overtakes a bulk backlog - on Redis
because BRPOP names the critical list first, on RabbitMQ because each queue's consumer
gets deliveries in turn as the prefetch credit frees (README "Priority lanes")."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.utils import timezone

from executions.models import StepExecutionLog
from tests.factories import (
    TriggerInstanceFactory,
    WorkflowFactory,
    bulk_instances,
    email_definition,
)
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.dispatch import dispatch_many_on_commit, dispatch_on_commit
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BACKLOG = 400
# Bulk steps that may start between the critical message's publish and its own start:
# Redis - the one running and the one its BRPOP already holds; RabbitMQ - one per
# non-empty queue as the credit frees, plus the one prefetched (README).
OVERTAKEN_BY_AT_MOST = {"redis": 2, "amqp": 6}


def _started(**lookup: object) -> list:
    return list(
        StepExecutionLog.objects.filter(**lookup)
        .order_by("started_at")
        .values_list("started_at", flat=True)
    )


def test_a_critical_step_starts_next_while_bulk_steps_are_queued(tmp_path):
    flush_broker()
    definition = email_definition("hi", to="someone@example.com")
    bulk = WorkflowFactory(definition=definition, priority="bulk")
    critical = WorkflowFactory(definition=definition, priority="critical")
    backlog = bulk_instances(bulk, {TriggerStatus.ENQUEUED: BACKLOG})
    dispatch_many_on_commit((row.pk, row.lane) for row in backlog)
    with celery_worker(tmp_path):
        # The worker is busy with the backlog before the critical trigger arrives.
        wait_until(
            lambda: StepExecutionLog.objects.filter(workflow=bulk).count() >= 10,
            timeout=180,
            what="the worker to start on the bulk backlog",
        )
        urgent = TriggerInstanceFactory(workflow=critical)
        assert urgent.lane == "critical"
        sent_at = timezone.now()
        dispatch_on_commit(urgent.pk, lane=urgent.lane)
        wait_until(
            lambda: TriggerInstance.objects.get(pk=urgent.pk).status == TriggerStatus.COMPLETED,
            timeout=180,
            what="the critical instance to complete",
        )
    (started,) = _started(trigger=urgent)
    overtaken_by = len([at for at in _started(workflow=bulk) if sent_at <= at < started])
    assert overtaken_by <= OVERTAKEN_BY_AT_MOST[settings.NOTIFYFLOW_BROKER_KIND]
    # Most of the backlog was still waiting: the critical step did not queue behind it.
    assert StepExecutionLog.objects.filter(workflow=bulk, started_at__lt=started).count() < (
        BACKLOG // 2
    )
    flush_broker()
