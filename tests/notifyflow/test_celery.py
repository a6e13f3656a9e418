"""The Celery settings that make at-least-once execution safe (a typo in a Celery
setting name is silently ignored, so the effective values are checked here)."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings

from notifyflow.celery import app


def test_at_least_once_settings_are_in_effect():
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json" and list(conf.accept_content) == ["json"]
    assert conf.task_ignore_result is True


def test_time_limits_lease_and_visibility_are_ordered():
    conf = app.conf
    assert conf.task_soft_time_limit < conf.task_time_limit < settings.NOTIFYFLOW_LEASE_S
    assert settings.NOTIFYFLOW_LEASE_S < settings.NOTIFYFLOW_VISIBILITY_TIMEOUT_S
    # Countdowns near the visibility timeout get redelivered (kombu#337, celery#2599).
    assert settings.NOTIFYFLOW_BROKER_HORIZON_S * 2 < settings.NOTIFYFLOW_VISIBILITY_TIMEOUT_S
    if settings.NOTIFYFLOW_BROKER_KIND == "redis":
        assert (
            conf.broker_transport_options["visibility_timeout"]
            == settings.NOTIFYFLOW_VISIBILITY_TIMEOUT_S
        )


def test_django_fixup_keeps_db_connections_between_tasks():
    from celery.fixups.django import DjangoWorkerFixup

    assert DjangoWorkerFixup(app).db_reuse_max >= 1000


def test_tasks_are_registered_under_stable_names():
    app.loader.import_default_modules()
    assert {"notifyflow.execute_node", "notifyflow.sweep"} <= set(app.tasks)


def test_sweeper_is_registered_with_beat(db):
    from django_celery_beat.models import PeriodicTask

    from executions.schedule import SWEEP_NAME, ensure_sweeper_schedule

    ensure_sweeper_schedule()
    ensure_sweeper_schedule()  # idempotent
    task = PeriodicTask.objects.get(name=SWEEP_NAME)
    assert task.task == "notifyflow.sweep" and task.enabled
    assert task.interval.every == max(1, round(settings.NOTIFYFLOW_SWEEP_INTERVAL_S))


def test_publish_and_broker_reconnect_settings_are_in_effect():
    """A broker restart is ridden out by publish retries and consumer reconnects."""
    conf = app.conf
    assert conf.task_publish_retry is True
    assert conf.task_publish_retry_policy["max_retries"] >= 3
    assert conf.broker_connection_retry is True and conf.broker_connection_retry_on_startup
    assert conf.broker_connection_max_retries >= 100
    options = conf.broker_transport_options
    if settings.NOTIFYFLOW_BROKER_KIND == "redis":
        assert options["socket_keepalive"] is True
        assert 0 < options["socket_connect_timeout"] < options["socket_timeout"]
    if settings.NOTIFYFLOW_BROKER_KIND == "amqp":
        # A publish RabbitMQ did not take raises (left for the sweeper), never vanishes.
        assert options["confirm_publish"] is True


def test_worker_children_are_bounded_in_memory_and_every_documented_pool_is_prefork():
    from pathlib import Path

    assert app.conf.worker_max_memory_per_child == settings.NOTIFYFLOW_WORKER_MAX_MEMORY_KB
    root = Path(__file__).resolve().parents[2]
    for path in ("scripts/run.sh", "docker-compose.yml", "README.md", "docs/operations.md"):
        text = (root / path).read_text()
        # Celery's solo and threads pools apply no time limit at all.
        assert "-P solo" not in text and "--pool=solo" not in text, path
        assert "-P threads" not in text, path


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_many_messages_are_published_together_after_commit():
    """``send_tasks_on_commit``: nothing before the commit, every message after it (one
    batched publish), each carrying its own arguments and the request id."""
    from django.db import transaction
    from kombu import Exchange, Queue

    from notifyflow import logs
    from notifyflow.celery import send_tasks_on_commit

    name = f"test.batched.{uuid.uuid4().hex}"
    default = app.conf.task_default_queue  # routes are cached per process: the default queue
    with app.connection_for_write() as conn:
        # The broker's own view of the queue (a Redis list or a RabbitMQ queue).
        queue = Queue(default, Exchange(default), routing_key=default)(conn.default_channel)
        queue.declare()
        queue.purge()
        try:
            with logs.bound(request_id="rid-1"), transaction.atomic():
                send_tasks_on_commit(name, [(f"id-{n}",) for n in range(1200)])
                assert queue.queue_declare().message_count == 0
            messages = []
            while (message := queue.get(no_ack=True, accept=["json"])) is not None:
                if message.headers["task"] == name:
                    messages.append(message)
        finally:
            queue.purge()
    assert sorted(m.headers["argsrepr"] for m in messages) == sorted(
        repr((f"id-{n}",)) for n in range(1200)
    )
    assert {m.headers["request_id"] for m in messages} == {"rid-1"}
