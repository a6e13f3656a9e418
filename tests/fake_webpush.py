"""A local Web Push service, for driving the real client (pywebpush over a kept-alive
requests session) - nothing mocked in the process. It makes the browsers' subscriptions
itself (a P-256 key and an auth secret each), so it decrypts every payload it receives
(RFC 8291, ``aes128gcm``): the encryption is proven, not assumed. It checks the VAPID
``Authorization`` header (RFC 8292: the ES256 JWT verified with the key it carries, its
audience, expiry and subject), answers as push services do (201 with ``Location``; 404 or
410 for a subscription that is gone; 429 with ``Retry-After``), and counts the TLS
connections it accepted."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fake_tls import LocalCA, NoDelayHTTPServer, wrap_handler_socket


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FakeWebPush:
    """A push service over HTTPS/1.1 (kept alive). ``subscribe()`` makes a browser's
    subscription (its own P-256 key and auth secret); every push to it is decrypted
    (``aes128gcm``) and its VAPID JWT verified. ``received``: (subscription id,
    decrypted payload, VAPID claims, VAPID public key) of every accepted push;
    ``headers``: every push's headers (names in lower case); ``refused``: why each
    refused push was refused. An answer is a status, or ``(status, headers)``; ``gone``
    lists subscription ids that answer 410; ``hold`` lists subscription ids whose first
    push waits for ``release`` before it is read (``held`` is set when one does: a worker
    can be killed while it waits for the answer)."""

    def __init__(self, ca: LocalCA) -> None:
        self.context = ca.server_context(["http/1.1"])
        self.subscriptions: dict[str, tuple[ec.EllipticCurvePrivateKey, bytes]] = {}
        self.script: list[int | tuple[int, dict[str, str]]] = []
        self.gone: set[str] = set()
        self.received: list[tuple[str, dict[str, Any], dict[str, Any], str]] = []
        self.refused: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.tls_connections = 0
        self.hold: set[str] = set()
        self.held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.server = NoDelayHTTPServer(("127.0.0.1", 0), self._handler())
        self.origin = f"https://127.0.0.1:{self.server.server_address[1]}"

    def subscribe(self) -> dict[str, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        auth = os.urandom(16)
        sid = uuid.uuid4().hex
        self.subscriptions[sid] = (key, auth)
        public = key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {
            "endpoint": f"{self.origin}/push/{sid}",
            "keys": {"p256dh": b64url(public), "auth": b64url(auth)},
        }

    def __enter__(self) -> FakeWebPush:
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def vapid_claims(self, authorization: str) -> tuple[dict[str, Any], str]:
        """The claims of ``vapid t=<JWT>, k=<key>``, verified with that key; raises
        ValueError naming what is wrong."""
        scheme, _, params = authorization.partition(" ")
        parts = dict(p.strip().split("=", 1) for p in params.split(",") if "=" in p)
        if scheme.lower() != "vapid" or "t" not in parts or "k" not in parts:
            raise ValueError(f"not a VAPID header: {authorization[:40]!r}")
        public = ec.EllipticCurvePublicKey.from_encoded_point(
            ec.SECP256R1(), b64url_decode(parts["k"])
        )
        claims = jwt.decode(parts["t"], public, algorithms=["ES256"], audience=self.origin)
        if not 0 < claims["exp"] - time.time() <= 24 * 3600:
            raise ValueError("exp must be within 24 hours")
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            raise ValueError("sub must be mailto: or https:")
        return claims, parts["k"]

    def _push(self, sid: str, headers: Any, body: bytes) -> tuple[int, dict[str, str]]:
        with self._lock:
            holding = sid in self.hold
            self.hold.discard(sid)
        if holding:
            self.held.set()
            self.release.wait(120)
        with self._lock:
            self.headers.append({name.lower(): value for name, value in headers.items()})
        if sid not in self.subscriptions or sid in self.gone:
            return 410, {}
        try:
            claims, vapid_key = self.vapid_claims(headers.get("Authorization", ""))
        except (ValueError, KeyError, jwt.PyJWTError) as exc:
            self.refused.append(f"vapid: {exc}")
            return 403, {}
        if headers.get("Content-Encoding") != "aes128gcm" or not headers.get("TTL"):
            self.refused.append("Content-Encoding aes128gcm and TTL are required")
            return 400, {}
        key, auth = self.subscriptions[sid]
        plaintext = http_ece.decrypt(body, private_key=key, auth_secret=auth, version="aes128gcm")
        with self._lock:
            answer = self.script.pop(0) if self.script else 201
            if (answer if isinstance(answer, int) else answer[0]) < 300:
                self.received.append((sid, json.loads(plaintext), claims, vapid_key))
        status, extra = answer if isinstance(answer, tuple) else (answer, {})
        if status == 201:
            extra = {"Location": f"{self.origin}/message/{uuid.uuid4().hex}", **extra}
        return status, extra

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                wrap_handler_socket(self, fake.context)
                with fake._lock:
                    fake.tls_connections += 1
                super().setup()

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sid = self.path.removeprefix("/push/")
                status, extra = fake._push(sid, self.headers, body)
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler
