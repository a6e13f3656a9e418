"""API keys as the services make them: a key is created with a scope, an optional list
of workflows and rate, its raw value returned once and only its hash stored; invalid
fields are refused naming them; a kept raw key is reused while active and replaced once
revoked; a rate can be changed; revoking is final."""

from __future__ import annotations

import pytest

from api_keys.models import ApiKey, ApiKeyScope
from api_keys.services import (
    api_key_create,
    api_key_reuse_or_create,
    api_key_revoke,
    api_key_set_rate,
)
from notifyflow.errors import ApplicationError

pytestmark = pytest.mark.django_db


def test_a_key_is_stored_by_its_hash_and_its_raw_value_returned_once():
    key, raw = api_key_create(name="  ci  ", scope=ApiKeyScope.TRIGGER, workflows=["b", "a", "b"])
    stored = ApiKey.objects.get()
    assert stored.pk == key.pk and stored.name == "ci"
    assert raw.startswith("nf_") and stored.prefix == raw[:10]
    assert stored.key_hash == ApiKey.hash_key(raw) and raw not in stored.key_hash
    assert (stored.scope, stored.workflows, stored.rate) == ("trigger", ["a", "b"], "")
    assert stored.is_active


def test_existing_keys_default_to_admin():
    key, _ = api_key_create(name="legacy")
    assert key.scope == "admin" and key.workflows == []


@pytest.mark.parametrize(
    ("fields", "field", "code"),
    [
        ({"name": " "}, "name", "required"),
        ({"name": "x", "scope": "root"}, "scope", "invalid_choice"),
        ({"name": "x", "rate": "fast"}, "rate", None),
    ],
)
def test_an_invalid_field_is_refused_naming_it_and_nothing_is_stored(fields, field, code):
    with pytest.raises(ApplicationError) as refused:
        api_key_create(**fields)
    assert refused.value.field == field
    assert code is None or refused.value.code == code
    assert not ApiKey.objects.exists()


def test_a_kept_key_is_reused_while_active_and_replaced_once_revoked():
    key, raw, created = api_key_reuse_or_create(raw=None, name="demo")
    assert created and key.scope == "admin"
    assert api_key_reuse_or_create(raw=raw, name="demo")[:3] == (key, raw, False)
    api_key_revoke(api_key=key)
    replaced, new_raw, created = api_key_reuse_or_create(raw=raw, name="demo")
    assert created and replaced.pk != key.pk and new_raw != raw


def test_a_rate_is_set_and_cleared_and_a_bad_one_refused():
    key, _ = api_key_create(name="throttled", rate="50/s")
    assert ApiKey.objects.get().rate == "50/s"
    api_key_set_rate(api_key=key, rate="")
    assert ApiKey.objects.get().rate == ""
    with pytest.raises(ApplicationError) as refused:
        api_key_set_rate(api_key=key, rate="lots")
    assert refused.value.field == "rate"


def test_revoking_is_final_and_a_second_revoke_keeps_the_first_time():
    key, _ = api_key_create(name="gone")
    api_key_revoke(api_key=key)
    revoked_at = ApiKey.objects.get().revoked_at
    assert revoked_at is not None and not ApiKey.objects.get().is_active
    api_key_revoke(api_key=key)
    assert ApiKey.objects.get().revoked_at == revoked_at
