"""Apple Push Notification service: HTTP/2 with token-based authentication.

The provider token is an ES256 JWT signed with the ``.p8`` key (``NOTIFYFLOW_APNS_KEY_FILE``,
``…_KEY_ID``, ``…_TEAM_ID``); Apple refuses one older than an hour and one renewed more
often than every 20 minutes, so it is made once per process and renewed after
``TOKEN_LIFETIME_S``. Every request carries ``apns-topic`` (the app's bundle id),
``apns-push-type``, ``apns-priority``, and when asked ``apns-expiration`` and
``apns-collapse-id``.

httpx with ``h2`` rather than ``aioapns``: aioapns is asyncio-only (a Celery prefork
worker would run an event loop per send, or keep one in a thread) and returns its own
result objects; httpx's synchronous client speaks HTTP/2 (ALPN), keeps its TLS
connections alive (one per request in flight: ``connections.ConnectionPerSender``), is
already the product's
HTTP client (timeouts, TLS trust, connection counting in ``connections``), and lets us
read Apple's status and ``reason`` directly.

Dead tokens, by reason: 410 (``Unregistered``, ``ExpiredToken``), ``BadDeviceToken``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings

from ..base import ProviderError
from ..connections import clients, http_client, tracer
from ..targets import (
    TargetOutcome,
    TargetResult,
    by_status,
    counted,
    not_configured,
    retry_after_seconds,
    unreachable,
)
from .message import PushMessage

PROVIDER = "apns"
HEX = frozenset("0123456789abcdefABCDEF")
PRODUCTION_URL = "https://api.push.apple.com"
SANDBOX_URL = "https://api.sandbox.push.apple.com"
# Apple: a token older than 60 minutes is refused, and renewing more often than every
# 20 minutes is refused (TooManyProviderTokenUpdates).
TOKEN_LIFETIME_S = 50 * 60
DEAD_REASONS = frozenset({"BadDeviceToken", "Unregistered", "ExpiredToken"})
TRANSIENT_REASONS = frozenset(
    {"TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown", "IdleTimeout"}
)


@dataclass
class ApnsClient:
    """One per process: the signing key and its current provider token, the kept-alive
    HTTP/2 client."""

    key: EllipticCurvePrivateKey
    key_id: str
    team_id: str
    topic: str
    base_url: str
    http: httpx.Client
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = ""
    issued_at: float = 0.0

    def provider_token(self, *, now: float | None = None) -> str:
        """The current provider token, signed again once it is TOKEN_LIFETIME_S old."""
        now = time.time() if now is None else now
        with self.lock:
            if not self.token or now - self.issued_at >= TOKEN_LIFETIME_S:
                self.token = jwt.encode(
                    {"iss": self.team_id, "iat": int(now)},
                    self.key,
                    algorithm="ES256",
                    headers={"kid": self.key_id},
                )
                self.issued_at = now
            return self.token

    def forget_token(self) -> None:
        with self.lock:
            self.token = ""

    def close(self) -> None:
        self.http.close()


def apns_url() -> str:
    """NOTIFYFLOW_APNS_URL, else Apple's sandbox or production server."""
    if settings.NOTIFYFLOW_APNS_URL:
        return str(settings.NOTIFYFLOW_APNS_URL).rstrip("/")
    return SANDBOX_URL if settings.NOTIFYFLOW_APNS_SANDBOX else PRODUCTION_URL


def build() -> ApnsClient:
    """The client from the NOTIFYFLOW_APNS_* settings; ProviderError when one is missing
    or the key cannot be read."""
    missing = [
        name
        for name in ("KEY_FILE", "KEY_ID", "TEAM_ID", "TOPIC")
        if not getattr(settings, f"NOTIFYFLOW_APNS_{name}")
    ]
    if missing:
        names = ", ".join(f"NOTIFYFLOW_APNS_{name}" for name in missing)
        raise ProviderError(f"{names} not set", permanent=True)
    try:
        with open(settings.NOTIFYFLOW_APNS_KEY_FILE, "rb") as f:
            key = load_pem_private_key(f.read(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ProviderError(f"NOTIFYFLOW_APNS_KEY_FILE: {exc!r}", permanent=True) from exc
    if not isinstance(key, EllipticCurvePrivateKey):
        raise ProviderError("NOTIFYFLOW_APNS_KEY_FILE is not an EC (.p8) key", permanent=True)
    return ApnsClient(
        key=key,
        key_id=settings.NOTIFYFLOW_APNS_KEY_ID,
        team_id=settings.NOTIFYFLOW_APNS_TEAM_ID,
        topic=settings.NOTIFYFLOW_APNS_TOPIC,
        base_url=apns_url(),
        http=http_client(timeout_s=settings.NOTIFYFLOW_PUSH_TIMEOUT_S),
    )


def apns_payload(message: PushMessage) -> dict[str, Any]:
    """The JSON body: ``aps`` (alert, badge, sound; ``content-available`` for a data-only
    message), then ``url`` and ``data``'s keys beside it for the app."""
    aps: dict[str, Any] = {}
    if message.is_alert:
        aps["alert"] = {"title": message.title, "body": message.body}
    else:
        aps["content-available"] = 1
    if message.badge is not None:
        aps["badge"] = message.badge
    if message.sound:
        aps["sound"] = message.sound
    payload: dict[str, Any] = {str(key): value for key, value in message.data.items()}
    if message.url:
        payload["url"] = message.url
    payload["aps"] = aps
    return payload


def apns_headers(message: PushMessage, *, topic: str, bearer: str) -> dict[str, str]:
    alert = message.is_alert
    headers = {
        "authorization": f"bearer {bearer}",
        "apns-topic": topic,
        # A background (data-only) push must say so and go at low priority.
        "apns-push-type": "alert" if alert else "background",
        "apns-priority": "10" if alert else "5",
    }
    if message.ttl is not None:
        # 0: deliver now or never; else the moment APNs stops trying.
        headers["apns-expiration"] = str(int(time.time()) + message.ttl if message.ttl else 0)
    if message.collapse_key:
        headers["apns-collapse-id"] = message.collapse_key[:64]
    return headers


def send(*, token: str, message: PushMessage) -> TargetResult:
    """Send ``message`` to one device token; never raises for what APNs answers or for a
    lost connection (see ``executions.providers.targets``)."""
    try:
        apns = clients.get(PROVIDER, build)
    except ProviderError as exc:
        return counted(not_configured(PROVIDER, exc))
    if not token or not set(token) <= HEX:  # device tokens are hex; never a path
        return counted(TargetResult(TargetOutcome.FAILED, PROVIDER, code="invalid_token"))
    try:
        response = apns.http.post(
            f"{apns.base_url}/3/device/{token}",
            content=json.dumps(apns_payload(message), separators=(",", ":")).encode(),
            headers=apns_headers(message, topic=apns.topic, bearer=apns.provider_token()),
            extensions={"trace": tracer(PROVIDER)},
        )
    except httpx.HTTPError as exc:
        return counted(unreachable(PROVIDER, exc))
    result = classify(response.status_code, response.content, response.headers)
    if result.code == "ExpiredProviderToken":
        apns.forget_token()  # the next send signs a new one
    return counted(result)


def classify(status: int, body: bytes, headers: httpx.Headers) -> TargetResult:
    """APNs' answer to one send, by status and ``reason``."""
    if status == 200:
        return TargetResult(
            TargetOutcome.ACCEPTED, PROVIDER, provider_message_id=headers.get("apns-id", "")
        )
    try:
        reason = str(json.loads(body).get("reason") or "")
    except (ValueError, AttributeError):
        reason = ""
    detail = body[:300].decode("utf-8", "replace")
    code = reason or str(status)
    if status == 410 or reason in DEAD_REASONS:
        return TargetResult(TargetOutcome.DEAD, PROVIDER, code=code, detail=detail)
    if reason == "ExpiredProviderToken" or reason in TRANSIENT_REASONS:
        return TargetResult(
            TargetOutcome.RETRY,
            PROVIDER,
            code=code,
            retry_after_s=retry_after_seconds(headers.get("Retry-After")),
            detail=detail,
        )
    return by_status(
        PROVIDER, status, code=code, retry_after=headers.get("Retry-After"), detail=detail
    )
