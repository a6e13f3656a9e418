"""The in-app feed's per-recipient rate (issue 39 item 6, NOTIFYFLOW_FEED_RATE): over
it, any feed endpoint answers 429 ``throttled`` with ``Retry-After`` (readable by the
browser: CORS exposes it), for every token of that recipient alike; other recipients
and API keys are not affected; an empty rate turns it off. On by default."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from feed.tokens import feed_token_create
from tests.factories import RecipientFactory

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _feed(recipient_id: str) -> APIClient:
    token = feed_token_create(recipient_id=recipient_id, now=timezone.now()).token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _person() -> str:
    # A fresh id per test: the throttle's window lives in the cache, not the database.
    return RecipientFactory(id=f"rate-{uuid.uuid4().hex[:12]}").pk


def test_a_recipient_over_the_feed_rate_gets_429_with_retry_after(settings):
    settings.NOTIFYFLOW_FEED_RATE = "3/min"
    person, neighbour = _person(), _person()
    feed = _feed(person)
    statuses = [
        feed.get("/api/v1/feed/counts/").status_code,
        feed.get("/api/v1/feed/").status_code,
        feed.post(
            "/api/v1/feed/bulk/", {"action": "read", "ids": "all"}, format="json"
        ).status_code,
    ]
    assert statuses == [200, 200, 200]

    over = feed.get("/api/v1/feed/counts/")

    assert over.status_code == 429, over.content
    assert over.json()["code"] == "throttled"
    assert 1 <= int(over["Retry-After"]) <= 60
    assert over["Access-Control-Allow-Origin"] == "*"
    assert "Retry-After" in over["Access-Control-Expose-Headers"]
    # Per recipient, whichever token: a new tab's token is over it too...
    assert _feed(person).get("/api/v1/feed/").status_code == 429
    # ...another recipient is not.
    assert _feed(neighbour).get("/api/v1/feed/counts/").status_code == 200


def test_a_browser_s_preflight_is_never_throttled(settings):
    settings.NOTIFYFLOW_FEED_RATE = "1/min"
    feed = _feed(_person())
    assert feed.get("/api/v1/feed/counts/").status_code == 200
    assert [feed.options("/api/v1/feed/counts/").status_code for _ in range(3)] == [204] * 3


def test_an_empty_feed_rate_turns_it_off(settings):
    settings.NOTIFYFLOW_FEED_RATE = ""
    feed = _feed(_person())
    assert {feed.get("/api/v1/feed/counts/").status_code for _ in range(30)} == {200}


def _feed_rate_setting(**env: str) -> subprocess.CompletedProcess:
    """NOTIFYFLOW_FEED_RATE as the project's settings read it from ``env`` (the test
    settings turn it off), in a process of its own."""
    base = {k: v for k, v in os.environ.items() if k != "NOTIFYFLOW_FEED_RATE"}
    return subprocess.run(
        [sys.executable, "-c", "import notifyflow.settings as s; print(s.NOTIFYFLOW_FEED_RATE)"],
        cwd=ROOT,
        env={**base, "DJANGO_DEBUG": "1", "NOTIFYFLOW_ENV_FILE": "", **env},
        capture_output=True,
        text=True,
    )


def test_the_feed_rate_is_on_by_default_and_checked():
    assert _feed_rate_setting().stdout.strip() == "120/min"
    refused = _feed_rate_setting(NOTIFYFLOW_FEED_RATE="lots")
    assert refused.returncode != 0 and "NOTIFYFLOW_FEED_RATE" in refused.stderr
