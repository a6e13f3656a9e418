"""Crash and broker-loss recovery with real workers: kill -9 mid-run, the broker flushed."""

from __future__ import annotations

import time

import pytest

from executions.models import Delivery, DeliveryStatus, StepExecutionLog
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import celery_worker, flush_broker, kill9, sent_email, sent_sms, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]
N = 60


def completed() -> int:
    return TriggerInstance.objects.filter(status=TriggerStatus.COMPLETED).count()


def test_kill_9_mid_run_every_instance_completes_without_double_sends(tmp_path, capsys):
    flush_broker()
    wf = WorkflowFactory(definition=email_sms_definition())
    # A provider call of 1.2 s: the kill lands while the step seen in flight is still in
    # flight even when a loaded machine takes a while between that look and the kill
    # (at 0.15 s, and at 0.6 s beside another test process, the step had sometimes
    # finished: processing_at_kill=0).
    slow = {
        "SMS_BACKEND": "tests.fakes.SlowFileSmsBackend",
        "NOTIFYFLOW_TEST_SMS_DELAY_S": "1.2",
        "NOTIFYFLOW_LEASE_S": "10",
    }
    with celery_worker(tmp_path, name="doomed", pool="prefork", concurrency=2, **slow) as w:
        for n in range(N):
            trigger_create(workflow=wf.key, idempotency_key=f"kill-{n}", payload=PAYLOAD)
        # Kill while a step is mid-flight inside the slow provider call (an SMS step: an
        # email step seen in flight is over in milliseconds, and the 60 email messages
        # queue ahead of every SMS one), so the lease recovery path is what brings it back.
        wait_until(
            lambda: (
                StepExecutionLog.objects.count() >= N // 2
                and TriggerInstance.objects.filter(
                    status=TriggerStatus.PROCESSING, current_node_id="text"
                ).exists()
            ),
            timeout=180,
            interval=0.02,
            what="progress and a step in flight",
        )
        kill9(w)
    in_flight = TriggerInstance.objects.filter(status=TriggerStatus.PROCESSING).count()
    done_at_kill = completed()
    started = time.monotonic()
    with celery_worker(tmp_path, name="survivor", beat=True, **slow):
        wait_until(lambda: completed() == N, timeout=300, what="all instances to complete")
    recovery_s = time.monotonic() - started

    recovered = StepExecutionLog.objects.filter(error_kind="lease_expired").count()
    assert in_flight >= 1 and recovered == in_flight
    emails, sms = sent_email(tmp_path), sent_sms(tmp_path)
    sent_rows = Delivery.objects.filter(status=DeliveryStatus.SENT)
    assert sent_rows.count() == 2 * N
    # A message the database recorded as sent before the kill was never sent again;
    # only a send whose outcome the kill erased ("sending" -> attempts 2) may repeat.
    for delivery in sent_rows:
        key = f"{delivery.instance_id}:{delivery.node_id}"
        sent = (emails if delivery.channel == "email" else sms)[key]
        assert sent == delivery.attempts or (sent >= 1 and delivery.attempts >= sent), key
    twice = [k for k, v in (emails + sms).items() if v > 1]
    assert len(twice) <= in_flight, "only sends cut off mid-step may repeat"
    with capsys.disabled():
        print(
            f"\n[kill -9] instances={N} completed_at_kill={done_at_kill} "
            f"processing_at_kill={in_flight} leases_recovered={recovered} "
            f"emails={sum(emails.values())} sms={sum(sms.values())} "
            f"sent_twice={len(twice)} all_completed_after={recovery_s:.1f}s"
        )


def test_broker_flushed_mid_run_every_instance_completes(tmp_path, capsys):
    """The broker loses every queued message (Redis: FLUSHDB of its db; RabbitMQ: its
    queues purged): the sweeper re-sends what the database says is due."""
    flush_broker()
    wf = WorkflowFactory(definition=email_sms_definition(delay="3s"))
    with celery_worker(tmp_path, name="flushed", pool="prefork", concurrency=2, beat=True):
        for n in range(N):
            trigger_create(workflow=wf.key, idempotency_key=f"flush-{n}", payload=PAYLOAD)
        wait_until(
            lambda: StepExecutionLog.objects.count() >= N, timeout=180, what="the first steps"
        )
        # The broker's own db or vhost: all a flush can lose, without touching neighbours'.
        flush_broker()
        done_at_flush = completed()
        started = time.monotonic()
        wait_until(lambda: completed() == N, timeout=300, what="all instances to complete")
        recovery_s = time.monotonic() - started
    emails, sms = sent_email(tmp_path), sent_sms(tmp_path)
    assert len(emails) == N and len(sms) == N
    assert set(emails.values()) == {1} and set(sms.values()) == {1}
    assert StepExecutionLog.objects.filter(success=True).count() == 3 * N
    with capsys.disabled():
        print(
            f"\n[broker flushed] instances={N} completed_at_flush={done_at_flush} "
            f"all_completed_after={recovery_s:.1f}s emails={sum(emails.values())} "
            f"sms={sum(sms.values())}"
        )
