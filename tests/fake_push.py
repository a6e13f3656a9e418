"""Local fakes of APNs and FCM, for driving the real clients (httpx over HTTP/2 for
APNs, the kept-alive HTTP/1.1 client for FCM, google-auth) - nothing mocked in the
process:

- ``FakeApns``: APNs over HTTP/2 and TLS (a test CA), checking the ES256 provider token,
  the topic and the path; answers Apple's shapes (``apns-id``; ``{"reason": ...}``).
- ``FakeFcm``: the OAuth token endpoint a service account's ``token_uri`` names (the JWT
  assertion's RS256 signature checked) and the HTTP v1 ``messages:send`` over TLS, HTTP/2
  or HTTP/1.1 as FCM's own endpoint, answering FCM's error bodies
  (``google.firebase.fcm.v1.FcmError`` details).

Web Push's fake is ``tests/fake_webpush.py``. Answers are scripted: ``script`` in order, else
``by_token``, else success. Each counts the TLS connections it accepted.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.fake_tls import (
    H2Answer,
    H2Request,
    H2Server,
    LocalCA,
    NoDelayHTTPServer,
)


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> H2Answer:
    return H2Answer(
        status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode()
    )


# --- APNs --------------------------------------------------------------------------------


class FakeApns:
    """APNs' ``POST /3/device/{token}``. An answer is ``(status, reason)`` or ``(status,
    reason, headers)``: ``(410, "Unregistered")``, ``(400, "BadDeviceToken")``, ``(429,
    "TooManyRequests")``, ``(503, "ServiceUnavailable")``. ``received``: (token, headers,
    payload) of every authorised request; ``provider_tokens``: the JWTs seen (those in
    ``expired_tokens``, or an hour old, are refused as ``ExpiredProviderToken``)."""

    def __init__(self, ca: LocalCA, *, key_id: str, team_id: str, topic: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.key_id, self.team_id, self.topic = key_id, team_id, topic
        self.script: list[tuple] = []
        self.by_token: dict[str, tuple] = {}
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.provider_tokens: list[str] = []
        self.expired_tokens: set[str] = set()
        self._lock = threading.Lock()
        self.server = H2Server(self._handle, ca.server_context(["h2"]))
        self.url = self.server.url

    def write_key(self, path: Path) -> Path:
        """The signing key as Apple hands it out: a PKCS#8 PEM ``.p8`` file."""
        path.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return path

    @property
    def tls_connections(self) -> int:
        return self.server.tls_connections

    def settings(self, directory: Path) -> dict[str, Any]:
        """The Django settings that point the APNs client here (the key written there)."""
        return {
            "NOTIFYFLOW_APNS_KEY_FILE": str(self.write_key(directory / "AuthKey.p8")),
            "NOTIFYFLOW_APNS_KEY_ID": self.key_id,
            "NOTIFYFLOW_APNS_TEAM_ID": self.team_id,
            "NOTIFYFLOW_APNS_TOPIC": self.topic,
            "NOTIFYFLOW_APNS_URL": self.url,
        }

    def __enter__(self) -> FakeApns:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()

    def _refusal(self, request: H2Request) -> H2Answer | None:
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme != "bearer" or not bearer:
            return _json(403, {"reason": "MissingProviderToken"})
        try:
            header = jwt.get_unverified_header(bearer)
            claims = jwt.decode(bearer, self.key.public_key(), algorithms=["ES256"])
        except jwt.PyJWTError:
            return _json(403, {"reason": "InvalidProviderToken"})
        if header.get("kid") != self.key_id or claims.get("iss") != self.team_id:
            return _json(403, {"reason": "InvalidProviderToken"})
        if time.time() - claims.get("iat", 0) > 3600 or bearer in self.expired_tokens:
            return _json(403, {"reason": "ExpiredProviderToken"})
        with self._lock:
            if bearer not in self.provider_tokens:
                self.provider_tokens.append(bearer)
        if request.headers.get("apns-topic") != self.topic:
            return _json(400, {"reason": "TopicDisallowed"})
        return None

    def _handle(self, request: H2Request) -> H2Answer:
        if request.method != "POST" or not request.path.startswith("/3/device/"):
            return _json(405 if request.method != "POST" else 404, {"reason": "BadPath"})
        refused = self._refusal(request)
        if refused is not None:
            return refused
        token = request.path.removeprefix("/3/device/")
        try:
            payload = json.loads(request.body)
        except ValueError:
            return _json(400, {"reason": "PayloadEmpty"})
        with self._lock:
            self.received.append((token, request.headers, payload))
            answer = self.script.pop(0) if self.script else self.by_token.get(token)
        if answer is None:
            apns_id = request.headers.get("apns-id") or str(uuid.uuid4()).upper()
            return H2Answer(200, {"apns-id": apns_id})
        status, reason, *extra = answer
        body: dict[str, Any] = {"reason": reason}
        if status == 410:
            body["timestamp"] = int(time.time() * 1000)
        return _json(status, body, extra[0] if extra else None)


# --- FCM ---------------------------------------------------------------------------------

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# The audience google-auth signs every service-account assertion for, whatever the
# key's token_uri (Google's token endpoint checks it).
ASSERTION_AUDIENCE = "https://oauth2.googleapis.com/token"

# FCM HTTP v1 error bodies, by name: (HTTP status, google.rpc status, FcmError errorCode,
# the message text, a BadRequest field violation or None).
FCM_ERRORS: dict[str, tuple[int, str, str, str, str | None]] = {
    "UNREGISTERED": (404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.", None),
    "INVALID_TOKEN": (
        400,
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "The registration token is not a valid FCM registration token",
        "message.token",
    ),
    # Google's APIs quote a malformed field's value: the token itself ("{token}").
    "INVALID_TOKEN_VALUE": (
        400,
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "Invalid value at 'message.token' (TYPE_STRING), \"{token}\"",
        "message.token",
    ),
    "INVALID_PAYLOAD": (
        400,
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)",
        "message.android.ttl",
    ),
    "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.", None),
    "UNAVAILABLE": (
        503,
        "UNAVAILABLE",
        "UNAVAILABLE",
        "The service is currently unavailable.",
        None,
    ),
    "INTERNAL": (500, "INTERNAL", "INTERNAL", "Internal error encountered.", None),
    "SENDER_ID_MISMATCH": (
        403,
        "PERMISSION_DENIED",
        "SENDER_ID_MISMATCH",
        "SenderId mismatch",
        None,
    ),
}


def fcm_error_body(name: str, token: str = "") -> tuple[int, dict[str, Any]]:
    status, rpc_status, code, text, field = FCM_ERRORS[name]
    text = text.replace("{token}", token)
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}
    ]
    if field:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": text}],
            }
        )
    return status, {
        "error": {"code": status, "message": text, "status": rpc_status, "details": details}
    }


@functools.cache
def service_account_key() -> rsa.RSAPrivateKey:
    """One RSA key per test process (making one costs a good part of a test)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class FakeFcm:
    """FCM: ``POST /v1/projects/{project}/messages:send`` over HTTP/2 or HTTP/1.1
    (``url``) and the
    OAuth token endpoint over HTTP/1.1 (``token_uri``). An answer is an ``FCM_ERRORS``
    name, optionally with extra headers: ``("QUOTA_EXCEEDED", {"Retry-After": "30"})``.
    ``received``: (token, message) of every authorised send; ``tokens_issued``: access
    tokens handed out; ``token_script``: statuses the token endpoint answers first."""

    def __init__(self, ca: LocalCA, *, project_id: str = "notifyflow-test") -> None:
        self.project_id = project_id
        self.key = service_account_key()
        self.client_email = f"sender@{project_id}.iam.gserviceaccount.com"
        self.expires_in = 3600
        self.script: list[str | tuple[str, dict[str, str]]] = []
        self.by_token: dict[str, str] = {}
        self.token_script: list[int] = []
        self.tokens_issued: list[str] = []
        self.assertions: list[dict[str, Any]] = []
        self.received: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        alpn = ("h2", "http/1.1")
        self.server = H2Server(self._handle, ca.server_context(list(alpn)), alpn=alpn)
        self.url = self.server.url
        self.token_server = NoDelayHTTPServer(("127.0.0.1", 0), self._token_handler())
        self.token_uri = f"http://127.0.0.1:{self.token_server.server_address[1]}/token"

    @property
    def tls_connections(self) -> int:
        return self.server.tls_connections

    def write_credentials(self, path: Path) -> Path:
        """A service account's JSON key whose ``token_uri`` is this fake."""
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        info = {
            "type": "service_account",
            "project_id": self.project_id,
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": self.client_email,
            "client_id": "1234567890",
            "token_uri": self.token_uri,
        }
        path.write_text(json.dumps(info))
        return path

    def settings(self, directory: Path) -> dict[str, Any]:
        """The Django settings that point the FCM client here (credentials written there)."""
        return {
            "NOTIFYFLOW_FCM_CREDENTIALS": str(self.write_credentials(directory / "sa.json")),
            "NOTIFYFLOW_FCM_URL": self.url,
        }

    def __enter__(self) -> FakeFcm:
        self.server.start()
        threading.Thread(
            target=self.token_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        self.token_server.shutdown()
        self.token_server.server_close()

    def _grant(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The token endpoint: a JWT-bearer grant signed by the service account's key."""
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = jwt.decode(
                form.get("assertion", ""),
                self.key.public_key(),
                algorithms=["RS256"],
                audience=ASSERTION_AUDIENCE,
            )
        except jwt.PyJWTError as exc:
            return 400, {"error": "invalid_grant", "error_description": str(exc)}
        scopes = str(claims.get("scope", "")).split()
        if claims.get("iss") != self.client_email or SCOPE not in scopes:
            return 400, {"error": "invalid_scope"}
        with self._lock:
            self.assertions.append(claims)
            status = self.token_script.pop(0) if self.token_script else 200
            if status != 200:
                return status, {"error": "invalid_grant" if status < 500 else "internal_failure"}
            token = f"ya29.fake-{len(self.tokens_issued) + 1}-{uuid.uuid4().hex[:8]}"
            self.tokens_issued.append(token)
        return 200, {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"}

    def _token_handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                status, body = fake._grant(form) if self.path == "/token" else (404, {})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _handle(self, request: H2Request) -> H2Answer:
        if request.path != f"/v1/projects/{self.project_id}/messages:send":
            return _json(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "no"}})
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        with self._lock:
            authorised = scheme == "Bearer" and bearer in self.tokens_issued
        if not authorised:
            body = {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
            return _json(401, {"error": body})
        message = json.loads(request.body)["message"]
        with self._lock:
            self.received.append((message.get("token", ""), message))
            answer = self.script.pop(0) if self.script else self.by_token.get(message.get("token"))
        if answer is None:
            name = f"projects/{self.project_id}/messages/0:{uuid.uuid4().hex}"
            return _json(200, {"name": name})
        name, headers = answer if isinstance(answer, tuple) else (answer, {})
        status, body = fcm_error_body(name, message.get("token", ""))
        return _json(status, body, headers)
