from __future__ import annotations

import os
import socket

import pytest
from django.conf import settings
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread
from rest_framework.test import APIClient

from notifyflow import caching, db

from .factories import WorkflowFactory

REQUIRE_SERVICES = os.environ.get("NOTIFYFLOW_REQUIRE_SERVICES") == "1"
USING_POSTGRES = db.is_postgres()
BROKER_KIND = settings.NOTIFYFLOW_BROKER_KIND
USING_REDIS = BROKER_KIND == "redis"
# A broker server a real worker can share with the tests: Redis or RabbitMQ.
USING_BROKER_SERVER = BROKER_KIND in ("redis", "amqp")


class _NoDelayWSGIServer(ThreadedWSGIServer):
    """The live server (``live_server``) with Nagle's algorithm off on its connections,
    as gunicorn has it: a client that writes a request's headers and body apart
    otherwise waits for a delayed ACK on every request (about 25 ms each here, against
    1 ms: the schemathesis run was made of such waits)."""

    def get_request(self):
        conn, address = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


LiveServerThread.server_class = _NoDelayWSGIServer


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if REQUIRE_SERVICES and not (USING_POSTGRES and USING_BROKER_SERVER):
        raise pytest.UsageError(
            "NOTIFYFLOW_REQUIRE_SERVICES=1 but DATABASE_URL is not PostgreSQL or "
            "CELERY_BROKER_URL is neither Redis nor RabbitMQ (amqp://): CI never falls back "
            "to SQLite or the filesystem broker"
        )
    skip_pg = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://...")
    skip_worker = pytest.mark.skip(
        reason="needs PostgreSQL and a Redis or RabbitMQ broker: set DATABASE_URL and "
        "CELERY_BROKER_URL"
    )
    skip_embedded = pytest.mark.skip(
        reason="starts `make run` on its embedded default whatever is set: run where "
        "nothing is set (CI's first leg, `make test`)"
    )
    for item in items:
        if "embedded" in item.keywords and USING_POSTGRES:
            item.add_marker(skip_embedded)
        # Everything that publishes to or consumes from the broker: `make test-amqp` runs
        # these again on RabbitMQ.
        if "worker" in item.keywords or "chaos" in item.keywords:
            item.add_marker(pytest.mark.broker)
        if "postgres" in item.keywords and not USING_POSTGRES:
            item.add_marker(skip_pg)
        if "worker" in item.keywords and not (USING_POSTGRES and USING_BROKER_SERVER):
            item.add_marker(skip_worker)
        redis_only = item.get_closest_marker("redis_only")
        if redis_only is not None and not USING_REDIS:
            what = redis_only.args[0] if redis_only.args else "a Redis-only feature"
            item.add_marker(
                pytest.mark.skip(reason=f"Redis broker only ({what}); the broker is {BROKER_KIND}")
            )


@pytest.fixture(autouse=True)
def _isolate(settings, tmp_path):
    settings.SMS_BACKEND = "locmem"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SMS_FILE_PATH = str(tmp_path / "sms")
    settings.NOTIFYFLOW_RETRY_BASE_DELAY_S = 60
    # In-process tests render pages without a collectstatic run; the manifest storage
    # is exercised where it matters, by the browser test's gunicorn (README's way).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # Test databases roll back, so ids (and cached rows keyed by them) get reused.
    caching.clear_all()
    from executions.providers import sms

    sms.outbox.clear()
    yield


@pytest.fixture
def api_key(db):
    from api_keys.services import api_key_create

    return api_key_create(name="tests")[1]


@pytest.fixture
def api(api_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


@pytest.fixture
def workflow(db):
    return WorkflowFactory()


class Dispatched(list[tuple[str, float | None]]):
    """What the ``dispatched`` fixture records: (instance id, countdown) per message,
    and in ``routes`` (instance id, queue) per message, in the same order."""

    def __init__(self) -> None:
        super().__init__()
        self.routes: list[tuple[str, str | None]] = []

    @property
    def queues(self) -> dict[str, str | None]:
        """The queue of each instance's last message."""
        return dict(self.routes)


@pytest.fixture
def dispatched(monkeypatch):
    """Record what the engine hands the broker, instead of sending it: (instance id,
    countdown) in order, and the queue of each (``Dispatched``)."""
    sent = Dispatched()

    def record(name, instance_id, countdown=None, queue=None):
        sent.append((instance_id, countdown))
        sent.routes.append((instance_id, queue))

    def record_many(name, args_list, queue=None):
        sent.extend((instance_id, None) for (instance_id,) in args_list)
        sent.routes.extend((instance_id, queue) for (instance_id,) in args_list)

    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", record)
    monkeypatch.setattr("triggers.dispatch.send_tasks_on_commit", record_many)
    # Nothing recorded waits in a queue (as if a worker had taken every message): the
    # sweeper's lost-message rule sees an empty broker, not the test broker's leftovers.
    monkeypatch.setattr(
        "triggers.dispatch.ready_messages", lambda app, queues: dict.fromkeys(queues, 0)
    )
    return sent
