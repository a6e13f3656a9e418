"""Per-API-key request throttling (docs/api.md#limits): a sliding window per key in Django's
cache (Redis in production, local memory in the embedded default). Over the rate: 429
with Retry-After (at least 1 s), in the one error shape (api.errors).

Off unless asked for. The keys belong to the operator's own services, and a default
limit refuses exactly the traffic the product is for (a campaign posting hundreds of
triggers a second); the payload caps, the bulk endpoint's size limit and the database
are what bound a request's cost. A rate is set per key (``create_api_key --rate``, the
key's page in the admin) for the keys that need one - a partner, a noisy service -, or
for every key without one through ``NOTIFYFLOW_THROTTLE_RATE``. DRF's window keeps one
timestamp per request in the window: prefer ``50/s`` to ``3000/min``.

The in-app feed's views, called by browsers with a recipient token, are throttled per
recipient instead (``PerRecipientThrottle``, ``NOTIFYFLOW_FEED_RATE``), on by default.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.throttling import SimpleRateThrottle

from .errors import ApplicationError
from .rates import RATE_EXAMPLES, is_rate

logger = logging.getLogger(__name__)
# Seconds between two warnings that the throttle's cache is unreachable.
_WARN_EVERY_S = 30.0
_last_warning = 0.0


def validate_rate(rate: str, *, field: str = "rate") -> str:
    """``rate`` stripped, or ``ApplicationError`` (code ``invalid``) naming ``field``;
    empty means no rate of its own."""
    rate = (rate or "").strip()
    if rate and not is_rate(rate):
        raise ApplicationError(
            field=field,
            code="invalid",
            message=f"{field}: expected requests per period, {RATE_EXAMPLES}",
        )
    return rate


class PerKeyThrottle(SimpleRateThrottle):
    """The authenticated key's own ``rate``, else ``NOTIFYFLOW_THROTTLE_RATE``; neither:
    not throttled (and no cache round trip)."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        # The rate depends on the key: chosen per request in allow_request.
        return None

    def rate_for(self, request: Any) -> str | None:
        """The rate this request is held to; None: not throttled."""
        return getattr(request.user, "rate", "") or settings.NOTIFYFLOW_THROTTLE_RATE or None

    def allow_request(self, request: Any, view: Any) -> bool:
        self.rate = self.rate_for(request)
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
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

    def wait(self) -> float:
        """Whole seconds until a request would pass, at least 1: DRF answers None when
        the window holds more requests than the rate (a key whose rate was lowered), and
        a fraction of a second becomes ``Retry-After: 0`` - or no header at all."""
        assert self.num_requests is not None and self.duration is not None
        if len(self.history) >= self.num_requests:
            # The request that must leave the window before one more fits.
            leaving = self.history[self.num_requests - 1]
            remaining = leaving + self.duration - self.now
        else:
            remaining = 0.0
        return float(max(1, math.ceil(remaining)))

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        # The key's hash, not its row id: ids are reused where databases roll back.
        key_hash = getattr(request.user, "key_hash", None)
        if not key_hash:
            return None
        return f"throttle:{self.scope}:{key_hash[:32]}"


class PerRecipientThrottle(PerKeyThrottle):
    """The feed views' throttle: requests per recipient - the one a recipient token
    names (``request.user.recipient_id``), whichever token and browser tab they come
    from - at ``NOTIFYFLOW_FEED_RATE``; empty: not throttled. A front end that polls
    ``counts/`` runs far below the default; a script looping on one token does not. The
    same window, 429 and ``Retry-After`` as the per-key throttle; the cache key is a hash
    of the recipient id (no id of a person in the cache)."""

    scope = "feed_recipient"

    def rate_for(self, request: Any) -> str | None:
        return settings.NOTIFYFLOW_FEED_RATE or None

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        recipient_id = getattr(request.user, "recipient_id", None)
        if not recipient_id:
            return None
        digest = hashlib.sha256(recipient_id.encode()).hexdigest()[:32]
        return f"throttle:{self.scope}:{digest}"
