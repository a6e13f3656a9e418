"""Throttling is off by default and set per key (issue 23): one service at 100 requests/s
is never refused; a key given a rate (create_api_key --rate, the admin) gets 429 with
Retry-After, always, even right after its rate was lowered."""

from __future__ import annotations

import time

import pytest
from django.core.management import CommandError, call_command
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from api_keys.models import ApiKey
from api_keys.services import api_key_create, api_key_set_rate
from tests.admin_helpers import PASSWORD, make_superuser

pytestmark = pytest.mark.django_db


def client_with(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_one_key_is_never_throttled_by_default_even_at_hundreds_per_second(workflow):
    """13 s of a service at 100 requests/s, sent as fast as this client goes: more
    than any per-minute default below 100/s would allow."""
    api = client_with(api_key_create(name="campaign")[1])
    started = time.monotonic()
    statuses = [api.get("/api/v1/workflows/").status_code for _ in range(1_300)]
    assert set(statuses) == {200}
    assert time.monotonic() - started < 60  # all of them inside one minute's window


def test_a_key_with_a_rate_gets_429_with_retry_after_and_others_do_not(workflow):
    api = client_with(api_key_create(name="partner", rate="3/min")[1])
    assert [api.get("/api/v1/workflows/").status_code for _ in range(4)] == [200, 200, 200, 429]
    refused = api.get("/api/v1/workflows/")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert 1 <= int(refused["Retry-After"]) <= 60
    other = client_with(api_key_create(name="own-service")[1])
    assert other.get("/api/v1/workflows/").status_code == 200


def test_a_lowered_rate_still_answers_retry_after(workflow):
    key, raw = api_key_create(name="noisy", rate="10/min")
    api = client_with(raw)
    assert all(api.get("/api/v1/workflows/").status_code == 200 for _ in range(6))
    api_key_set_rate(api_key=key, rate="2/min")
    from api_keys.authentication import api_keys_by_hash

    api_keys_by_hash.clear()  # another process would see it within the cache's 10 s
    # The window now holds more requests than the rate allows.
    refused = api.get("/api/v1/workflows/")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60


def test_a_sub_second_wait_is_retry_after_1(workflow):
    api = client_with(api_key_create(name="fast", rate="1/s")[1])
    assert api.get("/api/v1/workflows/").status_code == 200
    refused = api.get("/api/v1/workflows/")
    assert refused.status_code == 429 and refused["Retry-After"] == "1"


def test_the_setting_throttles_keys_without_a_rate_of_their_own(settings, workflow):
    settings.NOTIFYFLOW_THROTTLE_RATE = "2/min"
    plain = client_with(api_key_create(name="plain")[1])
    assert [plain.get("/api/v1/workflows/").status_code for _ in range(3)] == [200, 200, 429]
    own = client_with(api_key_create(name="own", rate="100/min")[1])
    assert {own.get("/api/v1/workflows/").status_code for _ in range(3)} == {200}


def test_create_api_key_takes_a_rate_and_refuses_a_malformed_one(capsys):
    call_command("create_api_key", "partner", "--rate", "50/s")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    assert ApiKey.objects.get(key_hash=ApiKey.hash_key(raw)).rate == "50/s"
    for bad in ("50", "fast", "0/s", "50/fortnight"):
        with pytest.raises(CommandError, match="rate"):
            call_command("create_api_key", "bad", "--rate", bad)
    assert not ApiKey.objects.filter(name="bad").exists()


def test_the_admin_sets_a_rate_at_creation_and_changes_it_later():
    client = Client()
    assert client.login(
        request=HttpRequest(), username=make_superuser().username, password=PASSWORD
    )
    created = client.post(reverse("admin:api_keys_apikey_add"), {"name": "p", "rate": "5/s"})
    assert created.status_code == 200
    key = ApiKey.objects.get(name="p")
    assert key.rate == "5/s"
    change = reverse("admin:api_keys_apikey_change", args=[key.pk])
    assert 'name="rate"' in client.get(change).content.decode()
    bad = client.post(change, {"rate": "lots"})
    assert bad.status_code == 200 and "expected requests per period" in bad.content.decode()
    assert client.post(change, {"rate": "100/min", "name": "renamed"}).status_code == 302
    key.refresh_from_db()
    assert key.rate == "100/min" and key.name == "p"
    assert "100/min" in client.get(reverse("admin:api_keys_apikey_changelist")).content.decode()


def test_a_malformed_default_rate_refuses_to_start():
    """A typo must not throttle nothing (or answer 500 on the first request)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    def start(rate: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"],
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, "NOTIFYFLOW_THROTTLE_RATE": rate},
            capture_output=True,
            text=True,
        )

    refused = start("1200 per minute")
    assert refused.returncode != 0 and "NOTIFYFLOW_THROTTLE_RATE" in refused.stderr
    assert start("50/s").returncode == 0
