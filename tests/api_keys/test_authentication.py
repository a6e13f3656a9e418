"""Bearer API-key authentication: a valid key authenticates as itself, a revoked or
unknown one is a 401 (the cache of known keys forgets a revoked one), a token of
another kind is refused saying what it is, and ``last_used_at`` is written at most once
a minute."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from api_keys.authentication import OTHER_TOKENS, api_keys_by_hash, other_token_register
from api_keys.models import ApiKey
from api_keys.services import api_key_create, api_key_revoke
from notifyflow import caching

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/"


def client(authorization: str | None = None) -> APIClient:
    web = APIClient()
    if authorization is not None:
        web.credentials(HTTP_AUTHORIZATION=authorization)
    return web


def test_revoked_key_is_refused(workflow):
    key, raw = api_key_create(name="temp")
    web = client(f"Bearer {raw}")
    assert web.get("/api/v1/triggers/").status_code == 200
    api_key_revoke(api_key=key)
    api_keys_by_hash.clear()
    assert web.get("/api/v1/triggers/").status_code == 401
    assert ApiKey.objects.get().key_hash != raw and raw not in ApiKey.objects.get().key_hash


@pytest.mark.parametrize(
    ("authorization", "detail"),
    [
        (None, "not provided"),
        ("Basic dXNlcjpwYXNz", "expected 'Bearer <api key>'"),
        ("Bearer nf_not-a-key", "invalid or revoked API key"),
    ],
)
def test_a_request_without_a_valid_key_is_a_401_saying_why(authorization, detail):
    response = client(authorization).get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert detail in response.json()["message"]


def test_a_token_of_another_kind_is_refused_with_its_own_reason(monkeypatch):
    # Registered for this test only (apps register theirs at start: the feed its tokens).
    monkeypatch.setattr("api_keys.authentication.OTHER_TOKENS", dict(OTHER_TOKENS))
    other_token_register(prefix="nfr_", refusal="a recipient token; use the feed's endpoints")
    response = client("Bearer nfr_abc").get(URL)
    assert response.status_code == 401
    assert "a recipient token" in response.json()["message"]


def test_api_key_last_used_at_is_written_at_most_once_a_minute(api, workflow):
    key = ApiKey.objects.get()
    assert key.last_used_at is None
    api.get(URL)
    key.refresh_from_db()
    first = key.last_used_at
    assert first is not None
    api.get(URL)
    key.refresh_from_db()
    assert key.last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    caching.clear_all()
    api.get(URL)
    key.refresh_from_db()
    assert key.last_used_at > first
