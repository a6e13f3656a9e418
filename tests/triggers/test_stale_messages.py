"""The messages of cancelled instances dropped in bulk (triggers.stale_messages,
notifyflow.broker.sift): on the test broker, a sift removes exactly them and keeps every
other message in its order; a large cancel sifts on its own; a worker's streak of them
sifts once. The real-worker figures: tests/system/test_cancelled_backlog_worker.py."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from executions import engine
from notifyflow.celery import app, send_task_on_commit
from tests.factories import WorkflowFactory, bulk_instances, email_definition
from tests.worker import flush_broker
from triggers import stale_messages, state
from triggers.dispatch import EXECUTE_NODE_TASK, dispatch_many_on_commit
from triggers.models import TriggerInstance, TriggerStatus

QUEUE = "notifyflow.bulk"
needs_broker_server = pytest.mark.skipif(
    settings.NOTIFYFLOW_BROKER_KIND not in ("redis", "amqp"),
    reason="sifts a Redis or RabbitMQ queue: set CELERY_BROKER_URL",
)


def on_a_broker_server(test):
    """A test that publishes to, sifts and reads the broker's queue (committed rows)."""
    for mark in (pytest.mark.broker, pytest.mark.django_db(transaction=True)):
        test = mark(test)
    return needs_broker_server(test)


def _queued() -> list[tuple[str, str]]:
    """(task, argsrepr) of every message in QUEUE, oldest first (on RabbitMQ they are
    consumed: call once)."""
    if settings.NOTIFYFLOW_BROKER_KIND == "redis":
        with app.producer_or_acquire() as producer:
            with producer.channel.conn_or_acquire() as client:
                raw = client.lrange(QUEUE, 0, -1)
        envelopes = [json.loads(item) for item in reversed(raw)]  # LPUSH: oldest last
        return [(e["headers"]["task"], e["headers"]["argsrepr"]) for e in envelopes]
    found = []
    with app.connection_for_write() as conn:
        channel = conn.channel()
        while (message := channel.basic_get(QUEUE, no_ack=True)) is not None:
            headers = message.properties["application_headers"]
            found.append((headers["task"], headers["argsrepr"]))
        channel.close()
    return found


def _step(instance: TriggerInstance) -> tuple[str, str]:
    return (EXECUTE_NODE_TASK, f"('{instance.pk}',)")


@pytest.fixture
def backlog(settings):
    """900 queued instances of a bulk workflow, every third one to stay, the others to
    be cancelled; their messages sent as the product sends them - the first half by
    the Redis fast path, the second by Celery's own send_task - and one message of
    another task naming an instance to be cancelled (which must stay)."""
    flush_broker()
    wf = WorkflowFactory(definition=email_definition("hi", to="a@example.com"), priority="bulk")
    rows = bulk_instances(wf, {TriggerStatus.ENQUEUED: 900})
    dispatch_many_on_commit((row.pk, row.lane) for row in rows[:450])
    settings.NOTIFYFLOW_FAST_PUBLISH = False
    dispatch_many_on_commit((row.pk, row.lane) for row in rows[450:])
    live, doomed = rows[::3], [row for n, row in enumerate(rows) if n % 3]
    send_task_on_commit("notifyflow.fanout_run", str(doomed[0].pk), queue=QUEUE)
    yield rows, live, doomed
    flush_broker()


@on_a_broker_server
def test_a_sift_drops_the_cancelled_ones_and_keeps_the_rest_in_order(backlog, monkeypatch):
    rows, live, doomed = backlog
    monkeypatch.setattr(stale_messages, "SIFT_AFTER_CANCELLING", 10_000)  # not on cancel
    assert state.cancel_many(instance_ids=[r.pk for r in doomed], reason="x", actor="t") == 600

    result = stale_messages.lane_sift(queue=QUEUE)

    assert (result.scanned, result.dropped) == (900, 600)
    other = ("notifyflow.fanout_run", f"('{doomed[0].pk}',)")
    assert _queued() == [_step(row) for row in live] + [other]


@on_a_broker_server
def test_a_sift_looks_at_the_oldest_messages_of_its_window(backlog, monkeypatch):
    rows, live, doomed = backlog
    monkeypatch.setattr(stale_messages, "SIFT_AFTER_CANCELLING", 10_000)
    monkeypatch.setattr(stale_messages, "SIFT_WINDOW", 300)
    state.cancel_many(instance_ids=[r.pk for r in doomed], reason="x", actor="t")

    assert stale_messages.lane_sift(queue=QUEUE).dropped == 200

    kept = [row for n, row in enumerate(rows) if n >= 300 or n % 3 == 0]
    assert [task for task, _ in _queued()] == [EXECUTE_NODE_TASK] * len(kept) + [
        "notifyflow.fanout_run"
    ]


@on_a_broker_server
def test_a_large_cancel_leaves_none_of_their_messages_queued(backlog):
    rows, live, doomed = backlog
    assert len(doomed) >= stale_messages.SIFT_AFTER_CANCELLING

    state.cancel_many(instance_ids=[r.pk for r in doomed], reason="by key", actor="t")

    assert [m for m in _queued() if m[0] == EXECUTE_NODE_TASK] == [_step(row) for row in live]


@on_a_broker_server
@pytest.mark.redis_only("a sift rate shared through Redis")
def test_worker_sifts_of_one_queue_are_rated_among_all_processes(backlog, monkeypatch):
    rows, live, doomed = backlog
    monkeypatch.setattr(stale_messages, "SIFT_AFTER_CANCELLING", 10_000)
    stale_messages.lane_sift(queue=QUEUE, every_s=60)  # another process's, just now
    state.cancel_many(instance_ids=[r.pk for r in doomed], reason="x", actor="t")

    assert stale_messages.lane_sift(queue=QUEUE, every_s=60).dropped == 0
    assert stale_messages.lane_sift(queue=QUEUE).dropped == 600  # a cancel's: not rated


@pytest.fixture
def sifts(monkeypatch):
    """The queues sifted (recorded instead of sifting)."""
    stale_messages.reset()
    done: list[str] = []
    monkeypatch.setattr(
        stale_messages,
        "lane_sift",
        lambda *, queue, every_s=None: done.append(queue) or stale_messages.SiftResult(0, 0),
    )
    yield done
    stale_messages.reset()


def test_a_streak_of_messages_of_cancelled_instances_sifts_their_queue_once(sifts):
    for _ in range(stale_messages.SIFT_AFTER - 1):
        stale_messages.message_of_cancelled_instance(lane="bulk")
    assert sifts == []
    stale_messages.message_of_cancelled_instance(lane="bulk")
    assert sifts == ["notifyflow.bulk"]
    # Within SIFT_EVERY_S the process sifts that queue no more; another queue is its own.
    for _ in range(3 * stale_messages.SIFT_AFTER):
        stale_messages.message_of_cancelled_instance(lane="bulk")
        stale_messages.message_of_cancelled_instance(lane="high")
    assert sifts == ["notifyflow.bulk", "notifyflow.high"]


@pytest.mark.django_db
def test_a_step_message_of_a_cancelled_instance_counts_toward_the_streak(sifts, dispatched):
    wf = WorkflowFactory(definition=email_definition("hi", to="a@example.com"), priority="high")
    rows = bulk_instances(wf, {TriggerStatus.CANCELLED: stale_messages.SIFT_AFTER})
    outcomes = {str(engine.step_execute(instance_id=row.pk)) for row in rows}
    assert outcomes == {"skipped:cancelled"}
    assert sifts == ["notifyflow.high"]


@pytest.mark.both_databases
@pytest.mark.django_db
def test_cancelled_ids_are_those_of_cancelled_instances():
    wf = WorkflowFactory()
    cancelled = bulk_instances(wf, {TriggerStatus.CANCELLED: 3})
    others = bulk_instances(wf, {TriggerStatus.ENQUEUED: 2, TriggerStatus.COMPLETED: 2})
    asked = [str(row.pk) for row in cancelled + others] + ["not-a-uuid", "'); DROP"]
    assert stale_messages.cancelled_ids(asked) == {str(row.pk) for row in cancelled}
