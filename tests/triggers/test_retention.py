"""purge_finished against an operator's retry of an instance in its batch (issue 24 item
8): the purge skips an instance that is no longer finished - or is being retried right
now - instead of aborting with IntegrityError, and a retry of an instance the purge is
deleting answers 404, not 500. Real PostgreSQL row locks, made deterministic by waiting
until one side is seen blocked on the other's lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.admin_helpers import failed_instance
from tests.factories import WorkflowFactory, bulk_instances
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus
from triggers.retention import finished_purge

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _old_failed_instance() -> TriggerInstance:
    instance = failed_instance()
    TriggerInstance.objects.filter(pk=instance.pk).update(
        finished_at=timezone.now() - timedelta(days=40)
    )
    return instance


def _someone_waits_on_a_lock() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


class Holder(threading.Thread):
    """Runs ``work`` in a transaction on its own connection and keeps it open (its row
    locks held) until ``release`` is set, then commits."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.work, self.ready, self.release = work, threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.work()
                self.ready.set()
                self.release.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
            self.ready.set()
        finally:
            connections.close_all()


def _run_against(holder: Holder, call: Callable[[], Any]) -> Any:
    """Start ``holder``, then ``call`` in another thread; commit ``holder`` once ``call``
    is seen waiting on its lock (or has finished without waiting). Returns what ``call``
    returned; raises what it raised."""
    holder.start()
    assert holder.ready.wait(30) and holder.error is None, holder.error
    outcome: dict[str, Any] = {}

    def run_call() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            outcome["error"] = exc
        finally:
            connections.close_all()

    caller = threading.Thread(target=run_call, daemon=True)
    caller.start()
    deadline = time.monotonic() + 30
    while caller.is_alive() and not _someone_waits_on_a_lock() and time.monotonic() < deadline:
        time.sleep(0.02)
    holder.release.set()
    holder.join(30)
    caller.join(30)
    assert holder.error is None, holder.error
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_purge_skips_an_instance_a_retry_is_moving_out_of_failed():
    instance = _old_failed_instance()
    retrying = Holder(lambda: state.retry(instance_id=instance.pk, actor="op"))

    counts = _run_against(retrying, lambda: finished_purge(older_than=timedelta(days=30)))

    assert counts["instances"] == 0
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED
    retried = instance.status_changes.filter(from_status=TriggerStatus.FAILED)
    assert retried.get().to_status == TriggerStatus.ENQUEUED  # its history kept
    connection.close()


def test_a_retry_of_an_instance_being_purged_answers_404(api):
    instance = _old_failed_instance()

    # The purge deletes the instance and holds its transaction open.
    purging = Holder(lambda: finished_purge(older_than=timedelta(days=30)))
    response = _run_against(
        purging, lambda: api.post(f"/api/v1/triggers/{instance.pk}/retry/", {}, format="json")
    )

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert not TriggerInstance.objects.filter(pk=instance.pk).exists()
    connection.close()


def test_a_purge_takes_old_finished_webhook_messages_and_the_instances_sequences_not_pending_ones():
    from status_webhooks.models import InstanceSequence, WebhookMessage
    from status_webhooks.outbox import NewEvent, record
    from tests.factories import WebhookEndpointFactory

    WebhookEndpointFactory(event_types=["instance.failed", "instance.cancelled"])
    instance = _old_failed_instance()
    record(events=[NewEvent(type="instance.cancelled", instance_id=instance.pk)] * 2)
    old = timezone.now() - timedelta(days=40)
    messages = WebhookMessage.objects.filter(instance_id=instance.pk)
    assert messages.count() >= 2 and InstanceSequence.objects.filter(pk=instance.pk).exists()
    delivered, pending = messages.order_by("-sequence")[:2]
    messages.exclude(pk__in=[delivered.pk, pending.pk]).delete()
    WebhookMessage.objects.filter(pk=delivered.pk).update(status="delivered", created_at=old)
    WebhookMessage.objects.filter(pk=pending.pk).update(created_at=old)

    counts = finished_purge(older_than=timedelta(days=30))

    assert counts["instances"] == 1 and counts["webhook_messages"] == 1
    assert list(WebhookMessage.objects.values_list("pk", flat=True)) == [pending.pk]
    assert not InstanceSequence.objects.filter(pk=instance.pk).exists()


def _throttle_counter(subject: str, *, written_ago: timedelta, window: timedelta):
    from gates.models import ThrottleCounter
    from gates.throttles import epoch_ms

    written = timezone.now() - written_ago
    return ThrottleCounter.objects.create(
        scope="recipient",
        subject=subject,
        key="digest",
        hits=[epoch_ms(written)],
        limit=1,
        window_ms=int(window.total_seconds() * 1000),
        updated_at=written,
    )


def test_a_purge_deletes_throttle_counters_past_their_window_and_the_retention_age():
    from gates.models import ThrottleCounter
    from gates.throttles import throttle_pass

    _throttle_counter("gone-1", written_ago=timedelta(days=40), window=timedelta(hours=1))
    _throttle_counter("gone-2", written_ago=timedelta(days=31), window=timedelta(days=1))
    # Its window still holds its hit: kept, or the key would let one more through.
    _throttle_counter("long-window", written_ago=timedelta(days=40), window=timedelta(days=60))
    # Younger than the retention age (its window has passed): kept, as the rest is.
    _throttle_counter("recent", written_ago=timedelta(days=2), window=timedelta(hours=1))

    counts = finished_purge(older_than=timedelta(days=30), batch=1)

    assert counts["throttle_counters"] == 2
    assert sorted(ThrottleCounter.objects.values_list("subject", flat=True)) == [
        "long-window",
        "recent",
    ]
    # A purged key throttles afresh: a new counter, its first pass goes through.
    again = throttle_pass(
        scope="recipient",
        subject="gone-1",
        key="digest",
        limit=1,
        window=timedelta(hours=1),
        now=timezone.now(),
    )
    assert again.passed and again.count == 1


def test_a_purge_keeps_a_throttle_counter_a_pass_is_writing():
    from gates.models import ThrottleCounter
    from gates.throttles import throttle_pass

    _throttle_counter("busy", written_ago=timedelta(days=40), window=timedelta(hours=1))
    passing = Holder(
        lambda: throttle_pass(
            scope="recipient",
            subject="busy",
            key="digest",
            limit=1,
            window=timedelta(hours=1),
            now=timezone.now(),
        )
    )

    counts = _run_against(passing, lambda: finished_purge(older_than=timedelta(days=30)))

    assert counts["throttle_counters"] == 0
    counter = ThrottleCounter.objects.get(subject="busy")
    assert len(counter.hits) == 1 and counter.updated_at > timezone.now() - timedelta(minutes=1)


def test_a_purge_batch_reads_the_oldest_finished_instances_through_their_index():
    """Each batch reads the oldest finished instances past the cutoff through the
    partial index trigger_finished_at, not a scan of the table: many recent finished
    instances and a queue of unfinished ones stay out of its way."""
    S = TriggerStatus
    bulk_instances(WorkflowFactory(), {S.COMPLETED: 4000, S.ENQUEUED: 1000})
    now = timezone.now()
    completed = TriggerInstance.objects.filter(status=S.COMPLETED)
    completed.update(finished_at=now - timedelta(hours=1))
    old = list(completed.values_list("pk", flat=True)[:20])
    TriggerInstance.objects.filter(pk__in=old).update(finished_at=now - timedelta(days=40))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")

    with CaptureQueriesContext(connection) as queries:
        counts = finished_purge(older_than=timedelta(days=30))

    assert counts["instances"] == 20
    batch = next(q["sql"] for q in queries.captured_queries if "SKIP LOCKED" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + batch)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "trigger_finished_at" in plan, plan
    assert "Seq Scan on triggers_triggerinstance" not in plan, plan
