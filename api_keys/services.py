"""API keys: create, reuse, throttle, revoke."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from django.utils import timezone

from notifyflow.errors import ApplicationError
from notifyflow.throttling import validate_rate

from .models import ApiKey, ApiKeyScope


def api_key_create(
    *,
    name: str,
    scope: str = ApiKeyScope.ADMIN,
    workflows: Sequence[str] = (),
    rate: str = "",
) -> tuple[ApiKey, str]:
    """Create an API key of ``scope`` (limited to ``workflows`` when given, throttled at
    ``rate`` when given: "50/s"); return the row and the raw key (shown once, never
    stored). ``ApplicationError`` names the invalid field."""
    rate = validate_rate(rate)
    if not name or not name.strip():
        raise ApplicationError(field="name", code="required", message="name: required")
    if scope not in ApiKeyScope.values:
        raise ApplicationError(
            field="scope",
            code="invalid_choice",
            message=f"scope: must be one of {', '.join(ApiKeyScope.values)}",
        )
    raw = "nf_" + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        name=name.strip(),
        prefix=raw[:10],
        key_hash=ApiKey.hash_key(raw),
        scope=scope,
        workflows=sorted(set(workflows)),
        rate=rate,
    )
    return key, raw


def api_key_reuse_or_create(*, raw: str | None, name: str) -> tuple[ApiKey, str, bool]:
    """The active key whose raw value is ``raw``, else a new admin key named ``name``;
    returns the row, the raw key and whether it was created. For a key kept outside the
    database (``make run``'s env file): reused while it works, replaced once revoked."""
    if raw:
        existing = ApiKey.objects.filter(
            key_hash=ApiKey.hash_key(raw), revoked_at__isnull=True
        ).first()
        if existing is not None:
            return existing, raw, False
    key, raw = api_key_create(name=name)
    return key, raw, True


def api_key_set_rate(*, api_key: ApiKey, rate: str) -> ApiKey:
    """Throttle ``api_key`` at ``rate`` ("50/s"; empty: NOTIFYFLOW_THROTTLE_RATE, off by
    default). Processes that cached the key apply it within the cache's 10 s.
    ``ApplicationError`` (field ``rate``) for a malformed rate."""
    api_key.rate = validate_rate(rate)
    ApiKey.objects.filter(pk=api_key.pk).update(rate=api_key.rate)
    return api_key


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
