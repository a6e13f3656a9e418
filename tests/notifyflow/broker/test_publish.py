"""The messages send_task_on_commit / send_tasks_on_commit put on the broker are the ones
Celery's send_task would - same task, args, headers (plus the request id), countdown as
an ETA, routed to the task's queue - with NOTIFYFLOW_FAST_PUBLISH on (the Redis mirror,
notifyflow/broker/publish.py) and off (Celery's own send_task), and a real worker runs
them either way."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta

import pytest
from celery import signals
from django.conf import settings
from django.utils import timezone
from kombu import Producer

from executions.models import StepExecutionLog
from notifyflow import logs
from notifyflow.broker.publish import Publisher
from notifyflow.celery import app, send_task_on_commit, send_tasks_on_commit
from tests.factories import TriggerInstanceFactory
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.dispatch import LANE_QUEUES, dispatch_many_on_commit, dispatch_on_commit
from triggers.models import TriggerInstance, TriggerStatus

TASK = "notifyflow.execute_node"
# Reads the queue's Redis list to compare envelopes byte for byte.
redis_only = pytest.mark.redis_only("the Redis envelope mirror (notifyflow/broker/publish.py)")

pytestmark = [
    pytest.mark.broker,
    # Outside a transaction (autocommit): on_commit sends at once.
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(params=[True, False], ids=["fast-publish-on", "fast-publish-off"])
def fast_publish(request, settings):
    settings.NOTIFYFLOW_FAST_PUBLISH = request.param
    return request.param


@pytest.fixture
def producer_publishes(monkeypatch):
    """The messages that went through kombu's ``Producer.publish`` (counted, still sent)."""
    calls: list[str] = []
    real = Producer.publish

    def publish(self, body, *args, **kwargs):
        calls.append(kwargs.get("headers", {}).get("id"))
        return real(self, body, *args, **kwargs)

    monkeypatch.setattr(Producer, "publish", publish)
    return calls


def _queued(queue: str = "notifyflow.default") -> list[dict]:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    messages = []
    for raw in reversed(client.lrange(queue, 0, -1)):  # LPUSH: oldest last
        envelope = json.loads(raw)
        envelope["decoded_body"] = json.loads(base64.b64decode(envelope["body"]))
        messages.append(envelope)
    return messages


def _without_ids(envelope: dict) -> dict:
    """The envelope with what differs per message (ids, tags, the body's bytes) removed."""
    headers = {k: v for k, v in envelope["headers"].items() if k not in ("id", "root_id")}
    properties = {
        k: v
        for k, v in envelope["properties"].items()
        if k not in ("correlation_id", "delivery_tag")
    }
    rest = {k: v for k, v in envelope.items() if k not in ("headers", "properties", "body")}
    return {**rest, "headers": headers, "properties": properties}


@redis_only
def test_a_published_message_is_what_send_task_would_send(fast_publish):
    flush_broker()
    app.send_task(TASK, args=("by-send-task",))
    with logs.bound(request_id="req-1"):
        send_task_on_commit(TASK, "fast", countdown=30)
    reference, sent = _queued()
    assert sent["decoded_body"][0] == ["fast"]
    assert sent["decoded_body"][1:] == reference["decoded_body"][1:]
    assert set(sent["headers"]) == set(reference["headers"]) | {"request_id"}
    assert sent["headers"]["request_id"] == "req-1"
    assert sent["headers"]["task"] == TASK
    assert sent["headers"]["id"] == sent["headers"]["root_id"] != reference["headers"]["id"]
    eta = datetime.fromisoformat(sent["headers"]["eta"])
    assert timedelta(seconds=25) < eta - datetime.now(eta.tzinfo) <= timedelta(seconds=30)
    assert sent["properties"]["delivery_info"] == reference["properties"]["delivery_info"]
    assert sent["properties"]["reply_to"] == reference["properties"]["reply_to"]
    flush_broker()


@redis_only
def test_many_messages_go_out_in_order_with_their_request_id(fast_publish):
    flush_broker()
    ids = [f"id-{n}" for n in range(50)]
    with logs.bound(request_id="req-2"):
        send_tasks_on_commit(TASK, [(i,) for i in ids])
    queued = _queued()
    assert [m["decoded_body"][0] for m in queued] == [[i] for i in ids]
    assert {m["headers"]["request_id"] for m in queued} == {"req-2"}
    assert len({m["headers"]["id"] for m in queued}) == 50
    assert all(m["headers"]["eta"] is None for m in queued)
    flush_broker()


@redis_only
def test_a_batch_larger_than_one_push_keeps_its_order(fast_publish, monkeypatch):
    monkeypatch.setattr("notifyflow.broker.publish.LPUSH_CHUNK", 7)
    flush_broker()
    ids = [f"id-{n}" for n in range(30)]
    send_tasks_on_commit(TASK, [(i,) for i in ids])
    queued = _queued()
    assert [m["decoded_body"][0] for m in queued] == [[i] for i in ids]
    assert (
        len(
            {m["headers"]["id"] for m in queued} | {m["properties"]["delivery_tag"] for m in queued}
        )
        == 60
    )
    flush_broker()


@redis_only
@pytest.mark.parametrize(
    "arg",
    [
        "same-args",
        "0190a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d",  # an instance id: the mirror's shortcut
        "ten-chars!",  # not a multiple of 3 long, not plain
        "O'Brien \u00e9",
    ],
)
def test_every_message_is_send_tasks_envelope_field_by_field(fast_publish, arg):
    """Once the queue is declared too (the mirror's case): a kombu or Celery upgrade that
    changes the envelope fails here."""
    flush_broker()
    send_task_on_commit(TASK, "declares-the-queue")
    flush_broker()
    with logs.bound(request_id="req-3"):
        app.send_task(TASK, args=(arg,), headers={"request_id": "req-3"})
        send_task_on_commit(TASK, arg)
        send_tasks_on_commit(TASK, [(arg,), (arg,)])
    reference, single, *batch = _queued()
    for sent in (single, *batch):
        assert _without_ids(sent) == _without_ids(reference)
        assert sent["decoded_body"] == reference["decoded_body"]
        assert sent["headers"]["id"] == sent["properties"]["correlation_id"]
    assert len({m["properties"]["delivery_tag"] for m in (single, *batch)}) == 3
    flush_broker()


@redis_only
def test_a_message_for_a_lane_is_send_tasks_envelope_on_that_lanes_queue(fast_publish):
    """The mirror keeps its envelope per queue: a critical message, after a default one
    declared the task's usual queue, is what ``send_task(queue=...)`` writes, on the
    critical list only."""
    flush_broker()
    send_task_on_commit(TASK, "declares-the-default-queue")
    send_task_on_commit(TASK, "declares-the-critical-queue", queue="notifyflow.critical")
    flush_broker()
    app.send_task(TASK, args=("same-args",), queue="notifyflow.critical")
    send_task_on_commit(TASK, "same-args", queue="notifyflow.critical")
    send_tasks_on_commit(TASK, [("same-args",)], queue="notifyflow.critical")
    assert _queued() == []
    reference, single, batch = _queued("notifyflow.critical")
    for sent in (single, batch):
        assert _without_ids(sent) == _without_ids(reference)
        assert sent["decoded_body"] == reference["decoded_body"]
    assert reference["properties"]["delivery_info"]["routing_key"] == "notifyflow.critical"
    flush_broker()


@redis_only
def test_dispatch_sends_each_instance_to_its_own_lanes_queue(fast_publish):
    """A batch of instances of every lane: each message on its lane's list, in the
    batch's order within a lane."""
    flush_broker()
    lanes = ["bulk", "critical", "normal", "high", "bulk", "critical"]
    ids = [f"id-{n}" for n in range(len(lanes))]
    dispatch_many_on_commit(zip(ids, lanes, strict=True))
    dispatch_on_commit("single", lane="high", countdown=None)
    for lane, queue in LANE_QUEUES.items():
        expected = [[i] for i, of in zip(ids, lanes, strict=True) if of == lane]
        expected += [["single"]] if lane == "high" else []
        assert [m["decoded_body"][0] for m in _queued(queue)] == expected
    assert _queued("celery") == []
    flush_broker()


def test_an_unknown_lane_is_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match="unknown lane"):
        dispatch_on_commit("x", lane="urgent")


@redis_only
def test_the_switch_decides_whether_messages_bypass_kombus_producer(
    fast_publish, producer_publishes
):
    """On: the first message of a task declares its queue through kombu's producer, the
    next ones are pushed onto the queue's list without it. Off: every message goes
    through Celery's send_task and kombu's producer."""
    flush_broker()
    sent_by_send_task: list[str] = []
    real_send_task = app.send_task

    def send_task(*args, **kwargs):
        sent_by_send_task.append(args[0])
        return real_send_task(*args, **kwargs)

    publisher = Publisher(app)  # a process that has published nothing yet
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app, "send_task", send_task)
        with app.producer_or_acquire() as producer:
            publisher.publish(producer, TASK, [("first",)], None)
            publisher.publish(producer, TASK, [("second",), ("third",)], None)
    assert [m["decoded_body"][0] for m in _queued()] == [["first"], ["second"], ["third"]]
    if fast_publish:
        assert (len(producer_publishes), sent_by_send_task) == (1, [])
    else:
        assert (len(producer_publishes), sent_by_send_task) == (3, [TASK] * 3)
    flush_broker()


@redis_only
def test_the_mirror_steps_aside_for_what_it_does_not_mirror(producer_publishes, settings):
    """A publish signal receiver: kombu's own producer, so the receiver sees it."""
    settings.NOTIFYFLOW_FAST_PUBLISH = True
    flush_broker()
    send_task_on_commit(TASK, "declares-the-queue")
    seen = []

    def receiver(sender=None, headers=None, **kwargs):
        seen.append(headers["id"])

    before = len(producer_publishes)
    signals.before_task_publish.connect(receiver)
    try:
        send_task_on_commit(TASK, "with-a-receiver")
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert len(seen) == 1
    assert len(producer_publishes) == before + 1
    flush_broker()


@redis_only
@pytest.mark.parametrize("countdown", [5, 0.25, 299.5])
def test_a_countdown_message_is_send_tasks_eta_envelope_field_by_field(
    producer_publishes, settings, countdown
):
    """A delay's or a retry's message (a countdown) takes the mirror too, once the queue
    is declared, and is what ``send_task(countdown=...)`` writes: the same envelope and
    an ``eta`` in the same form, the countdown ahead of the moment it was sent."""
    settings.NOTIFYFLOW_FAST_PUBLISH = True
    flush_broker()
    send_task_on_commit(TASK, "declares-the-queue")
    flush_broker()
    before = len(producer_publishes)
    sent_after = app.now()
    app.send_task(TASK, args=("by-send-task",), countdown=countdown)
    send_task_on_commit(TASK, "by-the-mirror", countdown=countdown)
    sent_before = app.now()
    # send_task's only: the mirror's message did not go through kombu's producer.
    assert len(producer_publishes) == before + 1
    reference, mirrored = _queued()
    eta, reference_eta = (
        datetime.fromisoformat(m["headers"].pop("eta")) for m in (mirrored, reference)
    )
    assert _without_ids(mirrored) == {
        **_without_ids(reference),
        "decoded_body": [["by-the-mirror"], *reference["decoded_body"][1:]],
        "headers": {**_without_ids(reference)["headers"], "argsrepr": "('by-the-mirror',)"},
    }
    assert eta.utcoffset() == reference_eta.utcoffset() == app.now().utcoffset()
    ahead = timedelta(seconds=countdown)
    assert sent_after + ahead <= reference_eta <= eta <= sent_before + ahead
    flush_broker()


@redis_only
def test_publishing_reuses_the_channels_redis_client():
    """notifyflow/broker/kombu_patches.py: one client object per channel, not one per
    message."""
    from notifyflow.broker.kombu_patches import Channel

    flush_broker()
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
    send_tasks_on_commit(TASK, [("a",), ("b",)])
    assert [m["decoded_body"][0] for m in _queued()] == [["a"], ["b"]]
    flush_broker()


@pytest.mark.worker
def test_a_real_worker_runs_what_either_switch_position_publishes(fast_publish, tmp_path):
    """Instances of every lane dispatched one by one and in a batch run to completion:
    a plain worker consumes every lane's queue, the messages this process publishes and
    those it publishes itself for each next step (it runs with the same switch)."""
    flush_broker()
    lanes = ["critical", "high", "normal", "bulk"]
    instances = [TriggerInstanceFactory(lane=lane) for lane in lanes]
    later = TriggerInstanceFactory(lane="normal")
    ids = [str(instance.pk) for instance in (*instances, later)]
    with celery_worker(tmp_path, NOTIFYFLOW_FAST_PUBLISH="1" if fast_publish else "0"):
        dispatch_on_commit(ids[0], lane=lanes[0])
        dispatch_many_on_commit(zip(ids[1:], lanes[1:], strict=False))
        sent = timezone.now()  # the normal lane's queue is declared: the mirror's case
        dispatch_on_commit(ids[-1], lane="normal", countdown=2)
        wait_until(
            lambda: (
                TriggerInstance.objects.filter(pk__in=ids, status=TriggerStatus.COMPLETED).count()
                == len(ids)
            ),
            timeout=180,
            what="the dispatched instances to complete",
        )
    # A countdown's message ran at its ETA, not when it arrived.
    first_step = StepExecutionLog.objects.filter(trigger=later).earliest("started_at")
    assert first_step.started_at >= sent + timedelta(seconds=2)
    flush_broker()
