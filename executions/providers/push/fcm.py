"""Firebase Cloud Messaging through the HTTP v1 API (Android, and iOS/web apps that use
Firebase).

Credentials: a service account's JSON key (``NOTIFYFLOW_FCM_CREDENTIALS``), read with
``google-auth``, which signs the JWT assertion and fetches the OAuth access token from the
key's ``token_uri``; the token is cached per process and refreshed a few minutes before
it expires. ``google-auth`` rather than ``firebase-admin``: the Admin SDK brings its own
HTTP stack (and Firestore, Storage... as dependencies) and hides the HTTP answer behind
exceptions whose classification we would have to undo; the v1 API is one POST, which our
own kept-alive HTTP/1.1 client makes (``connections.http1_client``: a quarter of httpx's
CPU over HTTP/2, bench/RESULTS.md issue 44) and classifies by FCM's ``errorCode``.

Dead tokens, by error code (never by message text): ``UNREGISTERED`` (404), and
``INVALID_ARGUMENT`` whose ``google.rpc.BadRequest`` detail names the field
``message.token`` (an invalid registration token; an ``INVALID_ARGUMENT`` about any other
field is a bad payload: failed, the token kept).
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings
from google.auth import exceptions as auth_exceptions

from notifyflow.http_client import Connections

from ..base import ProviderError
from ..connections import MAX_ANSWER_BYTES, clients, http1_client, requests_session
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

PROVIDER = "fcm"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
# FCM error codes that mean: this token will never receive again.
DEAD_CODES = frozenset({"UNREGISTERED"})
TRANSIENT_CODES = frozenset({"UNAVAILABLE", "INTERNAL", "QUOTA_EXCEEDED"})


@dataclass
class FcmClient:
    """One per process: the service account's credentials (and their cached access
    token), the kept-alive HTTP/2 client, the send URL."""

    credentials: Any  # google.oauth2.service_account.Credentials
    token_session: requests.Session
    http: Connections
    send_url: str
    lock: threading.Lock

    def access_token(self) -> str:
        """The cached access token, fetched again when it expires within minutes
        (google-auth's refresh threshold); one fetch at a time per process."""
        with self.lock:
            if not self.credentials.valid:
                from google.auth.transport.requests import Request

                self.credentials.refresh(Request(session=self.token_session))
            return str(self.credentials.token)

    def forget_token(self) -> None:
        with self.lock:
            self.credentials.token = None

    def close(self) -> None:
        self.http.close_all()
        self.token_session.close()


def build() -> FcmClient:
    """The client from NOTIFYFLOW_FCM_CREDENTIALS; ProviderError when it is unset or
    unreadable."""
    from google.oauth2 import service_account

    path = settings.NOTIFYFLOW_FCM_CREDENTIALS
    if not path:
        raise ProviderError("NOTIFYFLOW_FCM_CREDENTIALS is not set", permanent=True)
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        credentials = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
        project_id = info["project_id"]
    except (OSError, ValueError, KeyError) as exc:
        raise ProviderError(f"NOTIFYFLOW_FCM_CREDENTIALS: {exc!r}", permanent=True) from exc
    # The OAuth token endpoint (once an hour), its connections counted apart.
    token_session = requests_session("fcm_oauth")
    base = settings.NOTIFYFLOW_FCM_URL.rstrip("/")
    return FcmClient(
        credentials=credentials,
        token_session=token_session,
        http=http1_client(PROVIDER),
        send_url=f"{base}/v1/projects/{project_id}/messages:send",
        lock=threading.Lock(),
    )


def fcm_message(token: str, message: PushMessage) -> dict[str, Any]:
    """The v1 API's ``message`` for one registration token."""
    body: dict[str, Any] = {"token": token}
    if message.is_alert:
        body["notification"] = {"title": message.title, "body": message.body}
    data = message.data_strings()
    if data:
        body["data"] = data
    android: dict[str, Any] = {}
    if message.ttl is not None:
        android["ttl"] = f"{message.ttl}s"
    if message.collapse_key:
        android["collapse_key"] = message.collapse_key
    if message.sound and message.is_alert:
        android["notification"] = {"sound": message.sound}
    if android:
        body["android"] = android
    aps: dict[str, Any] = {}
    if message.badge is not None:
        aps["badge"] = message.badge
    if message.sound:
        aps["sound"] = message.sound
    if aps:
        body["apns"] = {"payload": {"aps": aps}}
    return body


def send(*, token: str, message: PushMessage) -> TargetResult:
    """Send ``message`` to one registration token; never raises for what FCM answers or
    for a lost connection (see ``executions.providers.targets``)."""
    try:
        fcm = clients.get(PROVIDER, build)
    except ProviderError as exc:
        return counted(not_configured(PROVIDER, exc))
    try:
        bearer = fcm.access_token()
    except auth_exceptions.GoogleAuthError as exc:
        return counted(token_refused(exc))
    body = json.dumps({"message": fcm_message(token, message)}, separators=(",", ":"))
    try:
        response = fcm.http.post(
            fcm.send_url,
            body=body.encode(),
            headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"},
            timeout=settings.NOTIFYFLOW_PUSH_TIMEOUT_S,
            max_body=MAX_ANSWER_BYTES,
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:  # a timeout is an OSError
        return counted(unreachable(PROVIDER, exc))
    result = classify(response.status, response.body, response.headers.get("retry-after"))
    if result.code == "UNAUTHENTICATED":
        fcm.forget_token()  # revoked or expired early: the next send fetches a new one
    return counted(result)


def token_refused(exc: auth_exceptions.GoogleAuthError) -> TargetResult:
    """The OAuth token endpoint failed: transient when google-auth says it may be
    retried (5xx, a lost connection), else the credentials are refused (permanent)."""
    transient = isinstance(exc, auth_exceptions.TransportError) or exc.retryable
    return TargetResult(
        TargetOutcome.RETRY if transient else TargetOutcome.FAILED,
        PROVIDER,
        code="token_unavailable" if transient else "token_refused",
        detail=str(exc)[:500],
    )


def error_codes(body: bytes) -> tuple[str, str, set[str]]:
    """(FCM ``errorCode``, the RPC ``status``, the fields a ``BadRequest`` detail names)
    of an error body; empty when it is not FCM's JSON."""
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        return "", "", set()
    if not isinstance(error, dict):
        return "", "", set()
    fcm_code, fields = "", set()
    for detail in error.get("details") or []:
        if not isinstance(detail, dict):
            continue
        if detail.get("@type") == FCM_ERROR:
            fcm_code = str(detail.get("errorCode") or "")
        elif detail.get("@type") == BAD_REQUEST:
            fields |= {str(v.get("field")) for v in detail.get("fieldViolations") or []}
    return fcm_code, str(error.get("status") or ""), fields


def classify(status: int, body: bytes, retry_after: str | None) -> TargetResult:
    """FCM's answer to one send, by status and error code."""
    if 200 <= status < 300:
        try:
            name = str(json.loads(body).get("name") or "")
        except (ValueError, AttributeError):
            name = ""
        return TargetResult(TargetOutcome.ACCEPTED, PROVIDER, provider_message_id=name)
    fcm_code, rpc_status, fields = error_codes(body)
    code = fcm_code or rpc_status or str(status)
    detail = body[:300].decode("utf-8", "replace")
    if fcm_code in DEAD_CODES or (fcm_code == "INVALID_ARGUMENT" and "message.token" in fields):
        return TargetResult(TargetOutcome.DEAD, PROVIDER, code=code, detail=detail)
    if fcm_code == "THIRD_PARTY_AUTH_ERROR":  # the app's APNs or Web Push credentials
        return TargetResult(TargetOutcome.FAILED, PROVIDER, code=code, detail=detail)
    if status == 401 or rpc_status == "UNAUTHENTICATED":
        # Our access token was refused (revoked, expired early): a new one may work.
        return TargetResult(TargetOutcome.RETRY, PROVIDER, code="UNAUTHENTICATED", detail=detail)
    if fcm_code in TRANSIENT_CODES:
        return TargetResult(
            TargetOutcome.RETRY,
            PROVIDER,
            code=code,
            retry_after_s=retry_after_seconds(retry_after),
            detail=detail,
        )
    return by_status(PROVIDER, status, code=code, retry_after=retry_after, detail=detail)
