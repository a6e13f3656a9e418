"""Per-API-key request throttling (SPEC §10): a sliding window per key in Django's
cache (Redis in production, local memory in the embedded default). Over the rate: 429
with Retry-After, in the one error shape (notifyflow.api_errors)."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)
# Seconds between two warnings that the throttle's cache is unreachable.
_WARN_EVERY_S = 30.0
_last_warning = 0.0


class PerKeyThrottle(SimpleRateThrottle):
    scope = "api_key"

    def allow_request(self, request: Any, view: Any) -> bool:
        # Fail open: with the cache (Redis) down the API keeps taking triggers, as it does
        # when a publish fails (the sweeper sends later); throttling resumes with Redis.
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError) as exc:
            global _last_warning
            now = time.monotonic()
            if now - _last_warning >= _WARN_EVERY_S:
                _last_warning = now
                logger.warning("throttle cache unreachable, requests not throttled: %s", exc)
            return True

    def get_rate(self) -> str | None:
        return settings.NOTIFYFLOW_THROTTLE_RATE or None

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        # The key's hash, not its row id: ids are reused where databases roll back.
        key_hash = getattr(request.user, "key_hash", None)
        if not key_hash:
            return None
        return f"throttle:{self.scope}:{key_hash[:32]}"
