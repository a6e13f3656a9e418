"""Per-API-key request throttling (SPEC §10): a sliding window per key in Django's
cache (Redis in production, local memory in the embedded default). Over the rate: 429
with Retry-After, in the one error shape (notifyflow.api_errors)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


class PerKeyThrottle(SimpleRateThrottle):
    scope = "api_key"

    def get_rate(self) -> str | None:
        return settings.NOTIFYFLOW_THROTTLE_RATE or None

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        # The key's hash, not its row id: ids are reused where databases roll back.
        key_hash = getattr(request.user, "key_hash", None)
        if not key_hash:
            return None
        return f"throttle:{self.scope}:{key_hash[:32]}"
