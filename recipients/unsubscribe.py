"""One-click unsubscribe tokens (RFC 8058): a token names a recipient and the
scope an unsubscribe opts out of (``preferences.unsubscribe_scope``). Signed with
``django.core.signing`` (SECRET_KEY, salt ``notifyflow.unsubscribe``) and never
expiring: an old email's link keeps working. A token only ever opts its recipient out
of its scope, so it may travel in mail and URLs."""

from __future__ import annotations

from django.conf import settings
from django.core import signing

SALT = "notifyflow.unsubscribe"


class BadToken(ValueError):
    """A token that was not made here (tampered, truncated, another key or salt)."""


def token_for(*, recipient_id: str, scope: str) -> str:
    """The URL-safe token for ``recipient_id`` opting out of ``scope``."""
    return signing.dumps([recipient_id, scope], salt=SALT, compress=True)


def read_token(token: str) -> tuple[str, str]:
    """``(recipient_id, scope)`` of a token made by ``token_for``; BadToken otherwise."""
    try:
        value = signing.loads(token, salt=SALT)
    except (signing.BadSignature, ValueError, TypeError) as exc:
        raise BadToken("not a valid unsubscribe token") from exc
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(part, str) and part for part in value)
    ):
        raise BadToken("not a valid unsubscribe token")
    return value[0], value[1]


def unsubscribe_url(*, recipient_id: str, scope: str) -> str | None:
    """``{NOTIFYFLOW_PUBLIC_URL}/u/{token}/``; None when NOTIFYFLOW_PUBLIC_URL is unset."""
    base = settings.NOTIFYFLOW_PUBLIC_URL
    if not base:
        return None
    token = token_for(recipient_id=recipient_id, scope=scope)
    # The path of the ``unsubscribe`` URL (notifyflow/urls.py), without a reverse() per send.
    return f"{base.rstrip('/')}/u/{token}/"
