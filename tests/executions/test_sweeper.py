"""The sweeper: lost messages, expired leases, delays beyond the broker horizon."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from executions import engine, sweeper
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from notifyflow.errors import ConflictError
from tests.factories import (
    TriggerInstanceFactory,
    WorkflowFactory,
    bulk_instances,
    email_definition,
)
from tests.fakes import email_node_stalling_past_its_lease
from tests.worker import flush_broker
from triggers import services
from triggers.dispatch import dispatch_many_on_commit, queued_messages
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def test_due_instance_with_a_lost_message_is_redispatched(dispatched, settings):
    settings.NOTIFYFLOW_REDISPATCH_AFTER_S = 30
    now = timezone.now()
    lost = TriggerInstanceFactory(
        available_at=now - timedelta(minutes=5), dispatched_at=now - timedelta(minutes=5)
    )
    fresh = TriggerInstanceFactory(
        available_at=now - timedelta(seconds=1), dispatched_at=now - timedelta(seconds=1)
    )
    TriggerInstanceFactory(available_at=now + timedelta(hours=1), dispatched_at=None)
    TriggerInstanceFactory(status=TriggerStatus.COMPLETED, available_at=now - timedelta(days=1))
    assert sweeper.sweep(now=now) == {
        "recovered": 0,
        "dispatched": 1,
        "outbox": 0,
        "fanouts": 0,
        "webhooks": 0,
    }
    assert dispatched == [(str(lost.pk), None)]
    # Dispatched once: the next sweep leaves it alone until it looks lost again.
    assert sweeper.sweep(now=now + timedelta(seconds=5))["dispatched"] == 0
    # 31 s on, both messages look lost (nobody claimed either instance).
    assert sweeper.sweep(now=now + timedelta(seconds=31))["dispatched"] == 2
    assert {i for i, _ in dispatched[1:]} == {str(lost.pk), str(fresh.pk)}


def test_long_delay_is_held_in_the_database_and_woken_by_the_sweeper(dispatched, settings):
    settings.NOTIFYFLOW_BROKER_HORIZON_S = 600
    definition = {
        "entry_node_id": "wait",
        "nodes": [
            {"id": "wait", "type": "delay", "config": {"duration": "2h"}},
            {"id": "text", "type": "sms", "config": {"to": "+1", "body": "x"}},
        ],
        "edges": [{"from": "wait", "to": "text"}],
    }
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=definition))
    engine.step_execute(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.dispatched_at is None
    assert dispatched == []  # nothing handed to the broker for a 2 h wait
    assert sweeper.sweep()["dispatched"] == 0
    assert sweeper.sweep(now=instance.available_at + timedelta(seconds=1))["dispatched"] == 1
    assert dispatched == [(str(instance.pk), None)]


def test_a_wait_held_in_the_database_goes_to_the_broker_once_due_within_its_horizon(
    dispatched, settings
):
    settings.NOTIFYFLOW_BROKER_HORIZON_S = 600
    now = timezone.now()
    soon = TriggerInstanceFactory(available_at=now + timedelta(minutes=5), dispatched_at=None)
    TriggerInstanceFactory(available_at=now + timedelta(minutes=11), dispatched_at=None)
    assert sweeper.sweep(now=now)["dispatched"] == 1
    # A countdown to its due time: the broker resumes it then, not the next sweep.
    assert dispatched == [(str(soon.pk), 300.0)]
    assert sweeper.sweep(now=now + timedelta(seconds=5))["dispatched"] == 0
    soon.refresh_from_db()
    assert soon.dispatched_at == now and soon.status == TriggerStatus.ENQUEUED


def test_expired_lease_is_recovered_as_a_failed_attempt(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    claimed = engine.claim(instance_id=instance.pk, worker="doomed@host")
    assert claimed is not None and claimed.instance.status == TriggerStatus.PROCESSING
    assert sweeper.sweep()["recovered"] == 0  # lease still valid
    later = claimed.instance.locked_until + timedelta(seconds=1)
    assert sweeper.sweep(now=later)["recovered"] == 1
    instance.refresh_from_db()
    assert (instance.status, instance.attempts, instance.lease_token) == (
        TriggerStatus.ENQUEUED,
        1,
        None,
    )
    assert "lease expired" in instance.last_error and "doomed@host" in instance.last_error
    assert dispatched[-1] == (str(instance.pk), None)
    log = StepExecutionLog.objects.get(trigger=instance)
    assert (log.success, log.error_kind, log.node_id) == (False, "lease_expired", "hello")


def test_lease_recovered_four_times_fails_the_instance(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    for _ in range(4):
        TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
        claimed = engine.claim(instance_id=instance.pk, worker="w")
        sweeper.sweep(now=claimed.instance.locked_until + timedelta(seconds=1))
    instance.refresh_from_db()
    assert (instance.status, instance.attempts) == (TriggerStatus.FAILED, 4)


def test_zombie_cannot_overwrite_after_its_lease_was_recovered(dispatched, monkeypatch):
    """A worker that stalls past its lease: the sweeper recovers the instance, a new
    worker completes it, then the zombie's late write is fenced out."""
    from workflows.definition import node_types

    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    real_email = node_types.get("email").run
    # While the zombie "sends", its lease expires and someone else takes over.
    email_node_stalling_past_its_lease(monkeypatch, instance)
    assert engine.step_execute(instance_id=instance.pk, worker="zombie") == StepOutcome.ADVANCED
    instance.refresh_from_db()
    # The zombie's "advance" was discarded: the sweeper's requeue stands.
    assert (instance.status, instance.current_node_id, instance.attempts) == (
        TriggerStatus.ENQUEUED,
        "hello",
        1,
    )
    zombie_log = StepExecutionLog.objects.get(trigger=instance, worker="zombie")
    assert zombie_log.error_kind == "lease_lost"
    # The next attempt does not send the email again: the delivery was recorded.
    from django.core import mail

    monkeypatch.setattr(node_types.get("email"), "run", real_email)
    assert engine.step_execute(instance_id=instance.pk, worker="w2") == StepOutcome.ADVANCED
    assert len(mail.outbox) == 1


def test_operator_retry_is_the_way_out_of_failed(dispatched):
    instance = TriggerInstanceFactory(status=TriggerStatus.FAILED, attempts=4, last_error="boom")
    assert services.instance_retry(instance_id=instance.pk, actor="alice")
    instance.refresh_from_db()
    assert (instance.status, instance.attempts, instance.last_error) == (
        TriggerStatus.ENQUEUED,
        0,
        "",
    )
    change = instance.status_changes.last()
    assert (change.from_status, change.to_status, change.actor) == ("failed", "enqueued", "alice")
    with pytest.raises(ConflictError) as refused:  # enqueued now, not failed
        services.instance_retry(instance_id=instance.pk, actor="alice")
    assert refused.value.code == "not_failed"


def test_run_now_makes_a_waiting_instance_due(dispatched):
    instance = TriggerInstanceFactory(available_at=timezone.now() + timedelta(hours=3))
    assert services.instance_run_now(instance_id=instance.pk, actor="bob")
    instance.refresh_from_db()
    assert instance.available_at <= timezone.now()
    assert dispatched == [(str(instance.pk), None)]
    assert instance.status_changes.last().actor == "bob"


def test_redispatched_and_recovered_instances_go_to_their_own_lanes(dispatched):
    now = timezone.now()
    lost = {
        priority: TriggerInstanceFactory(
            workflow=WorkflowFactory(priority=priority),
            available_at=now - timedelta(minutes=5),
            dispatched_at=None,
        )
        for priority in ("bulk", "critical")
    }
    held = TriggerInstanceFactory(workflow=WorkflowFactory(priority="high"))
    claimed = engine.claim(instance_id=held.pk, worker="doomed@host")
    assert claimed is not None
    assert sweeper.sweep(now=claimed.instance.locked_until + timedelta(seconds=1)) == {
        "recovered": 1,
        "dispatched": 2,
        "outbox": 0,
        "fanouts": 0,
        "webhooks": 0,
    }
    assert dispatched.queues == {
        str(lost["bulk"].pk): "notifyflow.bulk",
        str(lost["critical"].pk): "notifyflow.critical",
        str(held.pk): "notifyflow.high",
    }


@pytest.mark.broker
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    settings.NOTIFYFLOW_BROKER_KIND not in ("redis", "amqp"),
    reason="reads a Redis or RabbitMQ queue's depth: set CELERY_BROKER_URL",
)
def test_late_messages_still_in_their_queue_are_not_sent_again(settings):
    """A backlog deeper than NOTIFYFLOW_REDISPATCH_AFTER_S holds messages that are only
    late: the sweeper re-sends no more than its lane's queue can be missing."""
    flush_broker()
    settings.NOTIFYFLOW_REDISPATCH_AFTER_S = 30
    now = timezone.now()
    long_ago = now - timedelta(minutes=5)
    workflow = WorkflowFactory(definition=email_definition("late"))
    late = bulk_instances(workflow, {TriggerStatus.ENQUEUED: 5})
    TriggerInstance.objects.filter(pk__in=[i.pk for i in late]).update(
        available_at=long_ago, dispatched_at=long_ago
    )
    lane = workflow.priority
    with transaction.atomic():  # three of the five messages wait in the queue
        dispatch_many_on_commit([(i.pk, lane) for i in late[:3]])
    assert queued_messages([lane]) == {lane: 3}
    assert sweeper.redispatch_due(now=now, batch=100) == 2
    assert queued_messages([lane]) == {lane: 5}
    # Every message queued now: none is sent again, however late.
    assert sweeper.redispatch_due(now=now + timedelta(minutes=5), batch=100) == 0
    # The broker flushed: every one is lost and sent again.
    flush_broker()
    assert sweeper.redispatch_due(now=now + timedelta(minutes=10), batch=100) == 5
    assert queued_messages([lane]) == {lane: 5}
    flush_broker()
