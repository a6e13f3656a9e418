"""Recipient tokens for the feed API (SPEC §14): minted with an API key for one
recipient (``POST /recipients/{id}/feed-token/``), sent by the customer's front end as
``Authorization: Bearer <token>``, good for ``NOTIFYFLOW_FEED_TOKEN_TTL_S`` seconds.

A token is ``nfr_`` + a ``django.core.signing`` value of ``{"r": recipient id, "e":
expiry in epoch seconds}``, with a salt of its own (no other signed value of the
project - an unsubscribe token - is a feed token). Checking one is an HMAC, no database
read: the counts poll stays one primary-key read. A token of an erased recipient finds
no feed (its items and counter are gone); API keys start ``nf_`` and are never taken
for one (nor one for an API key: the API key authentication refuses the prefix).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core import signing

from notifyflow.errors import ApplicationError
from recipients.services import recipient_or_404

PREFIX = "nfr_"
SALT = "notifyflow.feed-token"


@dataclass(frozen=True)
class FeedToken:
    token: str
    expires_at: datetime


class FeedTokenError(ApplicationError):
    """A missing, forged or expired recipient token (401)."""

    status = 401


def looks_like_feed_token(value: str) -> bool:
    return value.startswith(PREFIX)


def feed_token_create(*, recipient_id: str, now: datetime) -> FeedToken:
    """A token for the recipient ``recipient_id`` (NotFoundError if unknown), expiring
    ``NOTIFYFLOW_FEED_TOKEN_TTL_S`` seconds after ``now``."""
    recipient = recipient_or_404(recipient_id)
    expires = int((now + timedelta(seconds=settings.NOTIFYFLOW_FEED_TOKEN_TTL_S)).timestamp())
    signed = signing.dumps({"r": recipient.pk, "e": expires}, salt=SALT, compress=True)
    return FeedToken(PREFIX + signed, datetime.fromtimestamp(expires, tz=UTC))


def feed_token_recipient(*, token: str, now: datetime) -> str:
    """The recipient id ``token`` was minted for; FeedTokenError ``invalid_token``
    (forged, altered, not a feed token) or ``token_expired``."""
    if not looks_like_feed_token(token):
        raise FeedTokenError(
            code="invalid_token",
            field="Authorization",
            message="Authorization: not a recipient token (POST /api/v1/recipients/{id}/"
            "feed-token/ mints one)",
        )
    recipient_id, expires = _verified(token, settings.SECRET_KEY)
    if now.timestamp() >= expires:
        raise FeedTokenError(
            code="token_expired",
            field="Authorization",
            message="Authorization: the recipient token expired; mint a new one",
        )
    return recipient_id


# A front end polls with the same token every few seconds: its checked claims are kept
# per process (keyed by the token and the signing key; the expiry is still checked on
# every use), so a poll costs a dictionary lookup instead of an HMAC and a JSON decode.
# Only valid tokens are kept: a forged one raises and is checked again every time.
@functools.lru_cache(maxsize=10_000)
def _verified(token: str, secret: str) -> tuple[str, int]:
    try:
        claims = signing.loads(token[len(PREFIX) :], key=secret, salt=SALT)
        recipient_id, expires = claims["r"], int(claims["e"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise FeedTokenError(
            code="invalid_token",
            field="Authorization",
            message="Authorization: the recipient token is invalid",
        ) from None
    if not isinstance(recipient_id, str):
        raise FeedTokenError(
            code="invalid_token",
            field="Authorization",
            message="Authorization: the recipient token is invalid",
        )
    return recipient_id, expires
