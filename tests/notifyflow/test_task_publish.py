"""The messages send_task_on_commit / send_tasks_on_commit put on the real Redis broker
are the ones Celery's send_task would: same task, args, headers (plus the request id),
countdown as an ETA, routed to the task's queue."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta

import pytest
from django.conf import settings

from notifyflow import logs
from notifyflow.celery import app, send_task_on_commit, send_tasks_on_commit
from tests.worker import flush_broker

pytestmark = [
    pytest.mark.broker,
    pytest.mark.redis_only("the fast publish path and notifyflow/kombu_redis.py"),
    # Outside a transaction (autocommit): on_commit sends at once.
    pytest.mark.django_db(transaction=True),
]


def _queued() -> list[dict]:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    messages = []
    for raw in reversed(client.lrange("celery", 0, -1)):  # LPUSH: oldest last
        envelope = json.loads(raw)
        envelope["decoded_body"] = json.loads(base64.b64decode(envelope["body"]))
        messages.append(envelope)
    return messages


def test_a_published_message_is_what_send_task_would_send():
    flush_broker()
    app.send_task("notifyflow.execute_node", args=("by-send-task",))
    with logs.bound(request_id="req-1"):
        send_task_on_commit("notifyflow.execute_node", "fast", countdown=30)
    reference, fast = _queued()
    assert fast["decoded_body"][0] == ["fast"]
    assert fast["decoded_body"][1:] == reference["decoded_body"][1:]
    assert set(fast["headers"]) == set(reference["headers"]) | {"request_id"}
    assert fast["headers"]["request_id"] == "req-1"
    assert fast["headers"]["task"] == "notifyflow.execute_node"
    assert fast["headers"]["id"] == fast["headers"]["root_id"] != reference["headers"]["id"]
    eta = datetime.fromisoformat(fast["headers"]["eta"])
    assert timedelta(seconds=25) < eta - datetime.now(eta.tzinfo) <= timedelta(seconds=30)
    assert fast["properties"]["delivery_info"] == reference["properties"]["delivery_info"]
    assert fast["properties"]["reply_to"] == reference["properties"]["reply_to"]
    flush_broker()


def test_many_messages_go_out_in_order_with_their_request_id():
    flush_broker()
    ids = [f"id-{n}" for n in range(50)]
    with logs.bound(request_id="req-2"):
        send_tasks_on_commit("notifyflow.execute_node", [(i,) for i in ids])
    queued = _queued()
    assert [m["decoded_body"][0] for m in queued] == [[i] for i in ids]
    assert {m["headers"]["request_id"] for m in queued} == {"req-2"}
    assert len({m["headers"]["id"] for m in queued}) == 50
    assert all(m["headers"]["eta"] is None for m in queued)
    flush_broker()


def test_publishing_reuses_the_channels_redis_client():
    """notifyflow.kombu_redis: one client object per channel, not one per message."""
    from notifyflow.kombu_redis import Channel

    flush_broker()
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
    send_tasks_on_commit("notifyflow.execute_node", [("a",), ("b",)])
    assert [m["decoded_body"][0] for m in _queued()] == [["a"], ["b"]]
    flush_broker()


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


def test_the_fast_publish_sends_kombus_own_envelope(monkeypatch):
    """notifyflow.celery._fast_publish writes the envelope kombu's Redis transport
    writes, field by field (a kombu upgrade that changes it fails here), and it is the
    path taken once the queue is declared."""
    from notifyflow import celery as nf_celery

    flush_broker()
    send_task_on_commit("notifyflow.execute_node", "declares-the-queue")
    assert "notifyflow.execute_node" in nf_celery._declared
    taken = []
    real = nf_celery._fast_publish
    monkeypatch.setattr(nf_celery, "_fast_publish", lambda *a: taken.append(real(*a)) or taken[-1])
    flush_broker()
    with logs.bound(request_id="req-3"):
        app.send_task(
            "notifyflow.execute_node", args=("same-args",), headers={"request_id": "req-3"}
        )
        send_task_on_commit("notifyflow.execute_node", "same-args")
        send_tasks_on_commit("notifyflow.execute_node", [("same-args",), ("same-args",)])
    reference, single, *batch = _queued()
    assert taken == [True, True]
    for fast in (single, *batch):
        assert _without_ids(fast) == _without_ids(reference)
        assert fast["decoded_body"] == reference["decoded_body"]
        assert fast["headers"]["id"] == fast["properties"]["correlation_id"]
    assert len({m["properties"]["delivery_tag"] for m in (single, *batch)}) == 3
    flush_broker()


def test_the_fast_publish_steps_aside_for_what_it_does_not_mirror(monkeypatch):
    """A countdown (an ETA) or a publish signal receiver: kombu's own path."""
    from celery import signals

    from notifyflow import celery as nf_celery

    flush_broker()
    send_task_on_commit("notifyflow.execute_node", "declares-the-queue")
    seen = []

    def receiver(sender=None, headers=None, **kwargs):
        seen.append(headers["id"])

    signals.before_task_publish.connect(receiver)
    try:
        send_task_on_commit("notifyflow.execute_node", "with-a-receiver")
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert len(seen) == 1
    with app.producer_or_acquire() as producer:
        route = nf_celery._routes["notifyflow.execute_node"]
        assert not nf_celery._fast_publish(producer, "x", route, [("a",)], None, 5.0)
    flush_broker()
