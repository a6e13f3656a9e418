"""Standard Webhooks signatures (https://www.standardwebhooks.com): what a receiver checks
with any implementation of the spec.

Headers: ``webhook-id`` (the event id, the same on every retry), ``webhook-timestamp``
(unix seconds of this attempt) and ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of
"<id>.<timestamp>.<body>">`` keyed with the base64-decoded part of the endpoint's secret
after ``whsec_``. During a rotation the signatures of both secrets are sent,
space-separated, so a receiver that still has the old one keeps verifying.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def secret_generate() -> str:
    """A new endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of ``secret`` (the bytes its base64 part encodes)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4))


def signature(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` sent as ``msg_id`` at ``timestamp``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(
    *, signing_secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every secret of ``signing_secrets`` (the
    current one first; the previous one too while a rotation lasts)."""
    signatures = " ".join(
        signature(secret=secret, msg_id=msg_id, timestamp=timestamp, body=body)
        for secret in signing_secrets
        if secret
    )
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
    }
