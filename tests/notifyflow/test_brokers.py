"""What the settings and the Celery app make of each broker URL: Redis gets its fast
transport, visibility timeout and the throttle's shared cache; RabbitMQ gets confirmed
publishes and falls back from everything that is Redis-only (docs/operations.md "Brokers")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from notifyflow.env import broker_kind
from tests.worker import ROOT

# Printed by a fresh interpreter: settings are read once per process, from the environment.
_PROBE = """
import json
import django
django.setup()
from django.conf import settings
from notifyflow.celery import app
print(json.dumps({
    "kind": settings.NOTIFYFLOW_BROKER_KIND,
    "transport": str(app.conf.broker_transport or ""),
    "options": app.conf.broker_transport_options,
    "cache": settings.CACHES["default"]["BACKEND"],
    "cache_location": settings.CACHES["default"].get("LOCATION", ""),
}))
"""


def _settings_for(broker_url: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.pop("NOTIFYFLOW_CACHE_URL", None)
    env["CELERY_BROKER_URL"] = broker_url
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:6379/5", "redis"),
        ("rediss://cache.example:6380/0", "redis"),
        ("amqp://guest:guest@127.0.0.1:5672//", "amqp"),
        ("amqps://user:pw@mq.example:5671/notifyflow", "amqp"),
        ("pyamqp://guest@localhost//", "amqp"),
        ("filesystem://", "filesystem"),
        ("memory://", "memory"),
    ],
)
def test_each_broker_url_is_classified_by_its_scheme(url, kind):
    assert broker_kind(url) == kind


def test_rabbitmq_publishes_confirmed_through_celerys_own_transport_and_throttles_in_memory():
    probe = _settings_for("amqp://guest:guest@127.0.0.1:5672/nf")
    assert probe["kind"] == "amqp"
    # kombu's own amqp transport, not the Redis one with its client reuse.
    assert "kombu_patches" not in probe["transport"]
    assert probe["options"] == {"confirm_publish": True}
    # The throttle's cache never points at a Redis that is not there.
    assert probe["cache"] == "django.core.cache.backends.locmem.LocMemCache"


def test_redis_gets_its_transport_visibility_timeout_and_the_shared_throttle_cache():
    probe = _settings_for("redis://127.0.0.1:6379/5")
    assert probe["kind"] == "redis"
    assert probe["transport"] == "notifyflow.broker.kombu_patches:Transport"
    assert probe["options"]["visibility_timeout"] > 0
    assert "confirm_publish" not in probe["options"]
    assert probe["cache"] == "django.core.cache.backends.redis.RedisCache"
    assert probe["cache_location"] == "redis://127.0.0.1:6379/5"
