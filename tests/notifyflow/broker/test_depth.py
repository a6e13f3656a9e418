"""A queue's waiting messages, as the broker counts them (notifyflow.broker.depth)."""

from __future__ import annotations

import pytest
from django.conf import settings

from notifyflow.broker.depth import ready_messages
from notifyflow.celery import app, publish_context, send_tasks
from tests.worker import flush_broker

on_a_broker_server = pytest.mark.skipif(
    settings.NOTIFYFLOW_BROKER_KIND not in ("redis", "amqp"),
    reason="counts a Redis or RabbitMQ queue: set CELERY_BROKER_URL",
)
QUEUE = "notifyflow.bulk"


@pytest.mark.broker
@on_a_broker_server
def test_waiting_messages_are_counted_per_queue():
    flush_broker()
    try:
        send_tasks(
            "notifyflow.execute_node", [(f"id-{n}",) for n in range(7)], publish_context(), QUEUE
        )
        counts = ready_messages(app, [QUEUE, "notifyflow.critical"])
        assert counts == {QUEUE: 7, "notifyflow.critical": 0}
    finally:
        flush_broker()


@pytest.mark.broker
@on_a_broker_server
def test_a_queue_never_declared_holds_nothing():
    assert ready_messages(app, ["notifyflow.no-such-queue"]) == {"notifyflow.no-such-queue": 0}


def test_an_embedded_broker_cannot_say(settings):
    settings.NOTIFYFLOW_BROKER_KIND = "filesystem"
    assert ready_messages(app, [QUEUE]) is None
