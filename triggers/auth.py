"""Bearer API-key authentication for the REST API."""

from __future__ import annotations

import time

from rest_framework import authentication, exceptions

from .models import ApiKey

# Positive lookups are cached briefly per process, so the hot path costs no query.
# A revoked key stops working within this many seconds.
_CACHE_TTL_S = 10.0
_cache: dict[str, tuple[float, ApiKey]] = {}


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise exceptions.AuthenticationFailed("expected 'Bearer <api key>'")
        digest = ApiKey.hash_key(token)
        now = time.monotonic()
        hit = _cache.get(digest)
        if hit and hit[0] > now:
            return (hit[1], hit[1])
        key = ApiKey.objects.filter(key_hash=digest, revoked_at__isnull=True).first()
        if key is None:
            _cache.pop(digest, None)
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        if len(_cache) > 1000:
            _cache.clear()
        _cache[digest] = (now + _CACHE_TTL_S, key)
        return (key, key)

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


def clear_cache() -> None:
    _cache.clear()
