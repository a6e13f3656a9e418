"""Bearer API-key authentication for the REST API."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from api_keys.models import ApiKey
from notifyflow.caching import ProcessCache

# Positive lookups are cached briefly per process, so the hot path costs no query.
# A revoked key stops working within the TTL.
api_keys_by_hash: ProcessCache[ApiKey] = ProcessCache(name="API keys", maxsize=1000, ttl_s=10.0)
# last_used_at is for operators ("is this key still used?"): a minute's precision is
# plenty, and it keeps the write off the hot path.
LAST_USED_PRECISION = timedelta(minutes=1)
# Bearer tokens of other kinds, by prefix -> why an API-key endpoint refuses them (a
# clearer answer than "invalid API key"). The feed registers its recipient tokens.
OTHER_TOKENS: dict[str, str] = {}


def other_token_register(*, prefix: str, refusal: str) -> None:
    """Refuse a bearer token starting with ``prefix`` with ``refusal``: it is not an API key."""
    OTHER_TOKENS[prefix] = refusal


def bearer_token(request: Request) -> str | None:
    """The token of the request's ``Authorization: Bearer <token>`` header: None when
    there is no header, "" when it is not a bearer token (API keys and recipient tokens
    alike)."""
    header = authentication.get_authorization_header(request).decode("latin-1")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[ApiKey, ApiKey] | None:
        token = bearer_token(request)
        if token is None:
            return None
        if not token:
            raise exceptions.AuthenticationFailed("expected 'Bearer <api key>'")
        for prefix, refusal in OTHER_TOKENS.items():
            if token.startswith(prefix):
                raise exceptions.AuthenticationFailed(refusal)
        digest = ApiKey.hash_key(token)
        key = api_keys_by_hash.get_or_load(
            digest,
            lambda: ApiKey.objects.filter(key_hash=digest, revoked_at__isnull=True).first(),
        )
        if key is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API key")
        _touch(key)
        return (key, key)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def _touch(key: ApiKey) -> None:
    """Write last_used_at at most once a minute per key and process."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_PRECISION:
        key.last_used_at = now
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)


def request_key(request: Request) -> ApiKey:
    """The API key ``request`` was authenticated with: every API view requires one
    (``IsAuthenticated`` and ``HasScope`` let no other caller in), so this is a type, not
    a check."""
    return cast(ApiKey, request.user)
