"""Web Push (browsers): VAPID (RFC 8292) and the payload encrypted for the subscription
(RFC 8291, ``aes128gcm``): ``pywebpush`` encrypts, the process's kept-alive HTTP/1.1
client posts.

A subscription is what the browser's ``PushManager.subscribe()`` gave:
``{endpoint, keys: {p256dh, auth}}``. The VAPID key (``NOTIFYFLOW_VAPID_PRIVATE_KEY``: a
PEM file, PEM text, or the base64url private key that ``web-push generate-vapid-keys``
prints) is loaded once per process; its signed ``Authorization`` header is kept per push
service (the JWT's audience) for an hour, so a send costs one encryption and no signature.
Every send goes through one client per process (``connections.http1_client``): a
kept-alive connection per push service (per send in flight), not one per subscription.
HTTP/1.1, which every push service speaks, rather than httpx over HTTP/2: httpx cost
388-461 us of CPU a send against 115-125 us (bench/RESULTS.md, issue 44). Not
pywebpush's own ``send`` over a requests session: the same post cost a third more of the
worker's CPU than httpx (issue 41).

Dead subscriptions, by status: 404 and 410 (RFC 8030: expired or unsubscribed). An
endpoint whose host NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS does not allow is never called
(failed, ``host_not_allowed``).
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings

from notifyflow.http_client import Connections, Response
from recipients.channel_inputs import webpush_endpoint_problem

from ..base import ProviderError
from ..connections import MAX_ANSWER_BYTES, clients, http1_client
from ..targets import TargetOutcome, TargetResult, by_status, counted, not_configured, unreachable
from .message import PushMessage

PROVIDER = "webpush"
# How long a push service keeps a message for an offline browser when the node sets no
# ttl (FCM's default, the longest the big push services keep one).
DEFAULT_TTL_S = 28 * 24 * 3600
# A VAPID JWT is valid 12 hours (push services refuse over 24); it is signed again
# after an hour.
VAPID_EXPIRY_S = 12 * 3600
VAPID_REUSE_S = 3600
# RFC 8030 Topic: at most 32 characters of the URL-safe base64 alphabet.
TOPIC_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass
class WebPushClient:
    """One per process: the VAPID key, its signed headers per audience, the client."""

    vapid: Any  # py_vapid.Vapid02
    subject: str
    http: Connections
    lock: threading.Lock = field(default_factory=threading.Lock)
    signed: dict[str, tuple[dict[str, str], float]] = field(default_factory=dict)

    def vapid_headers(self, endpoint: str, *, now: float | None = None) -> dict[str, str]:
        """``Authorization: vapid t=<JWT>, k=<public key>`` for the endpoint's origin."""
        now = time.time() if now is None else now
        parts = urlsplit(endpoint)
        audience = f"{parts.scheme}://{parts.netloc}"
        with self.lock:
            cached = self.signed.get(audience)
            if cached is not None and now - cached[1] < VAPID_REUSE_S:
                return cached[0]
            claims = {"aud": audience, "sub": self.subject, "exp": int(now) + VAPID_EXPIRY_S}
            headers = dict(self.vapid.sign(claims))
            self.signed[audience] = (headers, now)
            return headers

    def close(self) -> None:
        self.http.close_all()


def load_vapid(value: str) -> Any:
    """A py_vapid key from a PEM file's path, PEM text, or base64url (raw or DER)."""
    from py_vapid import Vapid

    text = value.strip()
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            text = f.read().strip()
    if "-----BEGIN" in text:
        return Vapid(private_key=load_pem_private_key(text.encode(), password=None))
    return Vapid.from_string(private_key=text)


def build() -> WebPushClient:
    """The client from NOTIFYFLOW_VAPID_*; ProviderError when unset or unreadable."""
    if not settings.NOTIFYFLOW_VAPID_PRIVATE_KEY or not settings.NOTIFYFLOW_VAPID_SUBJECT:
        raise ProviderError(
            "NOTIFYFLOW_VAPID_PRIVATE_KEY and NOTIFYFLOW_VAPID_SUBJECT must be set", permanent=True
        )
    if not settings.NOTIFYFLOW_VAPID_SUBJECT.startswith(("mailto:", "https:")):
        raise ProviderError(
            "NOTIFYFLOW_VAPID_SUBJECT must be a mailto: or https: URL", permanent=True
        )
    try:
        vapid = load_vapid(settings.NOTIFYFLOW_VAPID_PRIVATE_KEY)
    except Exception as exc:  # noqa: BLE001 - py_vapid and cryptography raise many kinds
        raise ProviderError(f"NOTIFYFLOW_VAPID_PRIVATE_KEY: {exc!r}", permanent=True) from exc
    return WebPushClient(
        vapid=vapid,
        subject=settings.NOTIFYFLOW_VAPID_SUBJECT,
        http=http1_client(PROVIDER),
    )


def webpush_payload(message: PushMessage) -> bytes:
    """The JSON the service worker's ``push`` event reads (encrypted on the way)."""
    payload: dict[str, Any] = {"title": message.title, "body": message.body}
    if message.url:
        payload["url"] = message.url
    if message.data:
        payload["data"] = dict(message.data)
    if message.badge is not None:
        payload["badge"] = message.badge
    if message.sound:
        payload["sound"] = message.sound
    return json.dumps(payload, separators=(",", ":")).encode()


def subscription_info(subscription: Mapping[str, Any] | str) -> dict[str, Any] | None:
    """``{endpoint, keys: {p256dh, auth}}`` (a dict, or its JSON), or None if malformed."""
    if isinstance(subscription, str):
        try:
            subscription = json.loads(subscription)
        except ValueError:
            return None
    if not isinstance(subscription, Mapping):
        return None
    endpoint, keys = subscription.get("endpoint"), subscription.get("keys")
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        return None
    if not isinstance(keys, Mapping) or not all(
        isinstance(keys.get(k), str) and keys.get(k) for k in ("p256dh", "auth")
    ):
        return None
    return {"endpoint": endpoint, "keys": {"p256dh": keys["p256dh"], "auth": keys["auth"]}}


def send(*, subscription: Mapping[str, Any] | str, message: PushMessage) -> TargetResult:
    """Encrypt ``message`` for one browser subscription and send it; never raises for
    what the push service answers or for a lost connection."""
    from pywebpush import WebPusher, WebPushException

    try:
        client = clients.get(PROVIDER, build)
    except ProviderError as exc:
        return counted(not_configured(PROVIDER, exc))
    info = subscription_info(subscription)
    if info is None:
        return counted(TargetResult(TargetOutcome.FAILED, PROVIDER, code="invalid_subscription"))
    # Checked when the device was saved, and again here: the allow-list may have changed,
    # and inline channel data must not make the worker an open HTTP client.
    problem = webpush_endpoint_problem(info["endpoint"])
    if problem is not None:
        return counted(
            TargetResult(TargetOutcome.FAILED, PROVIDER, code=problem[0], detail=problem[1])
        )
    try:
        body = WebPusher(info).encode(webpush_payload(message), "aes128gcm")["body"]
    except (WebPushException, ValueError) as exc:  # keys that are not P-256 points
        return counted(
            TargetResult(
                TargetOutcome.FAILED, PROVIDER, code="invalid_subscription", detail=str(exc)
            )
        )
    headers = {
        **client.vapid_headers(info["endpoint"]),
        "Content-Encoding": "aes128gcm",
        "TTL": str(DEFAULT_TTL_S if message.ttl is None else message.ttl),
    }
    if message.collapse_key and len(message.collapse_key) <= 32:
        if set(message.collapse_key) <= TOPIC_CHARS:
            headers["Topic"] = message.collapse_key
    try:
        response = client.http.post(
            info["endpoint"],
            body=body,
            headers=headers,
            timeout=settings.NOTIFYFLOW_PUSH_TIMEOUT_S,
            max_body=MAX_ANSWER_BYTES,
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:  # a timeout is an OSError
        return counted(unreachable(PROVIDER, exc))
    return counted(classify(response))


def classify(response: Response) -> TargetResult:
    """The push service's answer, by status: 201 (200, 202) accepted; 404 and 410 dead."""
    if response.status in (200, 201, 202):
        return TargetResult(
            TargetOutcome.ACCEPTED,
            PROVIDER,
            provider_message_id=response.location[:255],
        )
    return by_status(
        PROVIDER,
        response.status,
        retry_after=response.headers.get("retry-after"),
        detail=response.body.decode("utf-8", "replace")[:300],
        dead=frozenset({404, 410}),
    )
