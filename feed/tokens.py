"""Recipient tokens for the feed API (docs/api.md#in-app-feed): minted with an API key for one
recipient (``POST /recipients/{id}/feed-token/``), sent by the customer's front end as
``Authorization: Bearer <token>``, good for ``NOTIFYFLOW_FEED_TOKEN_TTL_S`` seconds.

A token is ``nfr_`` + a ``django.core.signing`` value of ``{"r": recipient id, "g": the
recipient's token generation, "e": expiry in epoch seconds}``, with a salt of its own
(no other signed value of the project - an unsubscribe token - is a feed token). API
keys start ``nf_`` and are never taken for one (nor one for an API key: the API key
authentication refuses the prefix).

Revocation (erasure, ``…/feed-token/revoke/``): the recipient row holds its token generation
(``Recipient.feed_token_generation``), random when the row is created and replaced by
``POST /recipients/{id}/feed-token/revoke/``; a token is good only while its ``g`` is
the row's. Erasure deletes the row, so every token of the person is refused, and a
recipient created later under the same id has a generation of its own: it inherits
none. Checking the signature and expiry is an HMAC (kept per process); checking the
generation is a primary-key read - for the polled ``GET /feed/counts/`` the same read
as its counts (``feed_token_counts``: one statement).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core import signing

from notifyflow import db
from notifyflow.errors import ApplicationError, NotFoundError
from recipients.models import Recipient, new_token_generation
from recipients.services import recipient_or_404

from .models import FeedCounter
from .store import NO_FEED, FeedCounts

PREFIX = "nfr_"
SALT = "notifyflow.feed-token"
# The generation of the tokens minted before generations existed (they carry none), and
# of the recipients that existed then (recipients migration 0002).
FIRST_GENERATION = 0


@dataclass(frozen=True)
class FeedToken:
    token: str
    expires_at: datetime


@dataclass(frozen=True)
class FeedClaims:
    """What a well-signed, unexpired token says: its recipient and generation."""

    recipient_id: str
    generation: int


class FeedTokenError(ApplicationError):
    """A missing, forged, expired or revoked recipient token (401)."""

    status = 401


def looks_like_feed_token(value: str) -> bool:
    return value.startswith(PREFIX)


def feed_token_create(*, recipient_id: str, now: datetime) -> FeedToken:
    """A token for the recipient ``recipient_id`` (NotFoundError if unknown), expiring
    ``NOTIFYFLOW_FEED_TOKEN_TTL_S`` seconds after ``now``."""
    recipient = recipient_or_404(recipient_id)
    expires = int((now + timedelta(seconds=settings.NOTIFYFLOW_FEED_TOKEN_TTL_S)).timestamp())
    claims = {"r": recipient.pk, "g": recipient.feed_token_generation, "e": expires}
    signed = signing.dumps(claims, salt=SALT, compress=True)
    return FeedToken(PREFIX + signed, datetime.fromtimestamp(expires, tz=UTC))


def feed_tokens_revoke(*, recipient_id: str) -> None:
    """Revoke every token minted for the recipient ``recipient_id`` so far (a new
    generation; tokens minted from now on are good). NotFoundError if unknown."""
    updated = Recipient.objects.filter(pk=recipient_id).update(
        feed_token_generation=new_token_generation()
    )
    if not updated:
        raise NotFoundError(
            code="not_found", field=None, message=f"no recipient with id {recipient_id!r}"
        )


def feed_token_claims(*, token: str, now: datetime) -> FeedClaims:
    """What ``token`` says, checked without the database (signature and expiry);
    FeedTokenError ``invalid_token`` (forged, altered, not a feed token) or
    ``token_expired``. Its generation is checked by ``feed_token_check`` or
    ``feed_token_counts``."""
    if not looks_like_feed_token(token):
        raise FeedTokenError(
            code="invalid_token",
            field="Authorization",
            message="Authorization: not a recipient token (POST /api/v1/recipients/{id}/"
            "feed-token/ mints one)",
        )
    claims, expires = _verified(token, settings.SECRET_KEY)
    if now.timestamp() >= expires:
        raise FeedTokenError(
            code="token_expired",
            field="Authorization",
            message="Authorization: the recipient token expired; mint a new one",
        )
    return claims


def feed_token_check(*, claims: FeedClaims) -> None:
    """FeedTokenError ``token_revoked`` unless the token's recipient exists with the
    token's generation (one primary-key read)."""
    current = Recipient.objects.filter(
        pk=claims.recipient_id, feed_token_generation=claims.generation
    ).exists()
    if not current:
        raise _revoked()


def feed_token_counts(*, claims: FeedClaims) -> FeedCounts:
    """The token's recipient's feed counts (``feed.feed_counts``) and the token's
    generation check, in one statement: FeedTokenError ``token_revoked`` as
    ``feed_token_check``."""
    row = db.fetch_prepared(_checked_counts_sql(), [claims.recipient_id])
    if row is None or row[0] != claims.generation:
        raise _revoked()
    if row[1] is None:  # no counter row: no item yet
        return NO_FEED
    return FeedCounts(int(row[1]), int(row[2]), int(row[3]))


@functools.cache
def _checked_counts_sql() -> str:
    """The recipient's generation and its counter row (if any): two primary-key probes."""
    person: Any = Recipient._meta
    counter: Any = FeedCounter._meta
    generation = person.get_field("feed_token_generation").column
    unread, unseen, version, owner = (
        counter.get_field(name).column
        for name in ("unread_count", "unseen_count", "version", "recipient")
    )
    return (
        f'SELECT r."{generation}", c."{unread}", c."{unseen}", c."{version}"'
        f' FROM "{person.db_table}" r LEFT JOIN "{counter.db_table}" c'
        f' ON c."{owner}" = r."{person.pk.column}" WHERE r."{person.pk.column}" = %s'
    )


def _revoked() -> FeedTokenError:
    return FeedTokenError(
        code="token_revoked",
        field="Authorization",
        message="Authorization: the recipient token was revoked (or its recipient erased); "
        "mint a new one",
    )


def _invalid() -> FeedTokenError:
    return FeedTokenError(
        code="invalid_token",
        field="Authorization",
        message="Authorization: the recipient token is invalid",
    )


# A front end polls with the same token every few seconds: its checked claims are kept
# per process (keyed by the token and the signing key; the expiry is still checked on
# every use, the generation by the read that follows), so a poll costs a dictionary
# lookup instead of an HMAC and a JSON decode. Only valid tokens are kept: a forged one
# raises and is checked again every time.
@functools.lru_cache(maxsize=10_000)
def _verified(token: str, secret: str) -> tuple[FeedClaims, int]:
    try:
        claims = signing.loads(token[len(PREFIX) :], key=secret, salt=SALT)
        recipient_id, expires = claims["r"], int(claims["e"])
        generation = claims.get("g", FIRST_GENERATION)
    except (signing.BadSignature, KeyError, TypeError, ValueError, AttributeError):
        raise _invalid() from None
    if not isinstance(recipient_id, str) or type(generation) is not int:
        raise _invalid()
    return FeedClaims(recipient_id, generation), expires
