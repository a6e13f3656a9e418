"""Recipient-token authentication for the feed views (SPEC §14), and only for them:
the feed views list this class alone, every other view the API key one (which refuses
a recipient token). A feed view answers an API key with 401 ``recipient_token_required``
- a key can read no feed - and a forged or expired token with 401 ``invalid_token`` /
``token_expired``. Checking a token reads nothing from the database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.utils import timezone
from rest_framework import authentication, permissions
from rest_framework.request import Request

from executions.feed_tokens import FeedTokenError, feed_token_recipient, looks_like_feed_token

from .auth import bearer_token


@dataclass(frozen=True)
class FeedRecipient:
    """Who a feed request is for: the recipient its token names."""

    recipient_id: str
    is_authenticated: bool = True


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
        recipient_id = feed_token_recipient(token=token, now=timezone.now())
        return FeedRecipient(recipient_id), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="feed"'


class IsFeedRecipient(permissions.BasePermission):
    """The request carries a valid recipient token."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, FeedRecipient)


def request_recipient(request: Request) -> str:
    """The recipient id of a feed request (``IsFeedRecipient`` let it in)."""
    return cast(FeedRecipient, request.user).recipient_id
