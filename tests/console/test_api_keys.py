"""Operator console: API keys are created through api_key_create, shown once, revoked."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from api_keys.models import ApiKey
from api_keys.services import api_key_create
from tests.admin_helpers import PASSWORD, make_operator, make_superuser

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:api_keys_apikey_changelist"


def client_for(user) -> Client:
    client = Client()
    assert client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def test_create_shows_the_raw_key_once_and_stores_only_its_hash():
    client = client_for(make_superuser())
    response = client.post(reverse("admin:api_keys_apikey_add"), {"name": "billing"})
    assert response.status_code == 200
    raw = response.context["raw_key"]
    assert raw.startswith("nf_") and f'value="{raw}"' in response.content.decode()
    key = ApiKey.objects.get(name="billing")
    assert key.key_hash == ApiKey.hash_key(raw)
    assert raw not in {key.name, key.prefix, key.key_hash} and raw.startswith(key.prefix)
    # Never again: not on the list, not on the key's page.
    assert raw not in client.get(reverse(CHANGELIST)).content.decode()
    page = client.get(reverse("admin:api_keys_apikey_change", args=[key.pk])).content.decode()
    assert raw not in page and key.key_hash not in page
    # The key works against the API.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/triggers/").status_code == 200


def test_key_hash_is_never_editable():
    client = client_for(make_superuser())
    key, raw = api_key_create(name="ops")
    url = reverse("admin:api_keys_apikey_change", args=[key.pk])
    page = client.get(url).content.decode()
    assert 'name="key_hash"' not in page and 'name="name"' not in page
    # Only the rate may change: the other fields posted are ignored.
    client.post(url, {"name": "x", "key_hash": "0" * 64, "rate": ""})
    key.refresh_from_db()
    assert key.key_hash == ApiKey.hash_key(raw) and key.name == "ops"


def test_revoke_action_revokes_and_operators_cannot():
    key, _ = api_key_create(name="old")
    operator_client = client_for(make_operator())
    page = operator_client.get(reverse(CHANGELIST)).content.decode()
    assert 'value="revoke"' not in page
    operator_client.post(reverse(CHANGELIST), {"action": "revoke", "_selected_action": [key.pk]})
    key.refresh_from_db()
    assert key.revoked_at is None
    assert operator_client.get(reverse("admin:api_keys_apikey_add")).status_code == 403

    client = client_for(make_superuser())
    assert 'value="revoke"' in client.get(reverse(CHANGELIST)).content.decode()
    response = client.post(
        reverse(CHANGELIST), {"action": "revoke", "_selected_action": [key.pk]}, follow=True
    )
    assert "Revoked 1 API key(s)." in [str(m) for m in response.context["messages"]]
    key.refresh_from_db()
    assert key.revoked_at is not None and not key.is_active
