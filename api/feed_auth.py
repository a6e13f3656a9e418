"""Recipient-token authentication for the feed views, and only for them:
the feed views list this class alone, every other view the API key one (which refuses
a recipient token). A feed view answers an API key with 401 ``recipient_token_required``
- a key can read no feed - and a forged, expired or revoked token with 401
``invalid_token`` / ``token_expired`` / ``token_revoked``. Checking a token's signature
and expiry reads nothing from the database; its generation (revocation) is one
primary-key read, which the polled counts view makes part of its own read
(``checks_token_itself``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.utils import timezone
from rest_framework import authentication, permissions
from rest_framework.request import Request

from api_keys.authentication import bearer_token
from feed.tokens import (
    FeedClaims,
    FeedTokenError,
    feed_token_check,
    feed_token_claims,
    looks_like_feed_token,
)


@dataclass(frozen=True)
class FeedRecipient:
    """Who a feed request is for: the recipient its token names (``claims``)."""

    claims: FeedClaims
    is_authenticated: bool = True

    @property
    def recipient_id(self) -> str:
        return self.claims.recipient_id


class FeedTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[FeedRecipient, str] | None:
        token = bearer_token(request)
        if token is None:
            return None
        if not token:
            raise FeedTokenError(
                code="invalid_token",
                field="Authorization",
                message="Authorization: expected 'Bearer <recipient token>'",
            )
        if not looks_like_feed_token(token):
            raise FeedTokenError(
                code="recipient_token_required",
                field="Authorization",
                message="Authorization: the feed takes a recipient token (POST /api/v1/"
                "recipients/{id}/feed-token/ mints one), not an API key",
            )
        claims = feed_token_claims(token=token, now=timezone.now())
        return FeedRecipient(claims), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="feed"'


class IsFeedRecipient(permissions.BasePermission):
    """The request carries a valid recipient token, not revoked: checked here, unless
    the view checks it in its own read (``checks_token_itself``, the counts)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.user, FeedRecipient):
            return False
        if not getattr(view, "checks_token_itself", False):
            feed_token_check(claims=request.user.claims)
        return True


def request_recipient(request: Request) -> str:
    """The recipient id of a feed request (``IsFeedRecipient`` let it in)."""
    return cast(FeedRecipient, request.user).recipient_id


def request_claims(request: Request) -> FeedClaims:
    """The token's claims of a feed request, for a view that checks its generation
    itself."""
    return cast(FeedRecipient, request.user).claims
