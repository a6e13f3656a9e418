"""Local fakes of the chat services, for driving the real clients (``slack_sdk``'s
``WebClient``, httpx) - nothing mocked in the process:

- ``FakeSlack``: the Web API's ``chat.postMessage`` (``slack_sdk``'s ``base_url`` points
  here), checking the bot token, answering Slack's shapes: ``{"ok": true, "channel",
  "ts"}``, ``{"ok": false, "error": "channel_not_found"}`` (HTTP 200), 429
  ``ratelimited`` with ``Retry-After``, and a 5xx with an HTML body as Slack's edge sends.
- ``FakeChatWebhooks``: incoming webhooks of Slack (``ok``; ``no_service`` 404,
  ``channel_is_archived`` 410, ``invalid_payload`` 400), Teams (202) and Discord (204;
  ``{"message", "code"}`` JSON errors, 429 with ``retry_after``).

Both count the TCP connections they accepted.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fake_tls import NoDelayHTTPServer


class _Recording(NoDelayHTTPServer):
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.connections = 0
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Recording

    def setup(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        super().setup()

    def log_message(self, *args: object) -> None:
        pass

    def reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeSlack:
    """``POST /api/chat.postMessage``. An answer is a Slack error code (``"is_archived"``),
    ``"ratelimited"`` (429 with ``Retry-After: retry_after``) or an HTTP status (``503``).
    ``received``: the JSON arguments of every call with the right token."""

    def __init__(self, *, token: str = "xoxb-test-token") -> None:
        self.token = token
        self.retry_after = "30"
        self.script: list[str | int] = []
        self.received: list[dict[str, Any]] = []
        fake = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status, body, headers = fake._answer(self.path, self.headers, raw)
                self.reply(status, body, headers)

        self.server = _Recording(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    @property
    def connections(self) -> int:
        return self.server.connections

    def __enter__(self) -> FakeSlack:
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, path: str, headers: Any, raw: bytes) -> tuple[int, bytes, dict[str, str]]:
        def ok_false(error: str, status: int = 200, **extra: str) -> tuple:
            body = json.dumps({"ok": False, "error": error}).encode()
            return status, body, {"Content-Type": "application/json; charset=utf-8", **extra}

        if path != "/api/chat.postMessage":
            return ok_false("unknown_method", 404)
        if headers.get("Authorization") != f"Bearer {self.token}":
            return ok_false("invalid_auth")
        arguments = json.loads(raw)
        with self.server.lock:
            self.received.append(arguments)
            answer = self.script.pop(0) if self.script else None
        if answer == "ratelimited":
            return ok_false("ratelimited", 429, **{"Retry-After": self.retry_after})
        if isinstance(answer, int):
            html = f"<html><body>{answer} Service Unavailable</body></html>".encode()
            return answer, html, {"Content-Type": "text/html"}
        if answer is not None:
            return ok_false(answer)
        channel = str(arguments.get("channel", ""))
        posted_in = "D0DM" + channel[1:] if channel.startswith("U") else channel
        ts = f"{time.time():.6f}"
        body = {
            "ok": True,
            "channel": posted_in,
            "ts": ts,
            "message": {"text": arguments.get("text"), "ts": ts},
        }
        return 200, json.dumps(body).encode(), {"Content-Type": "application/json; charset=utf-8"}


# Each service's answers, by status: (content type, body).
SLACK_HOOK_ANSWERS = {
    200: ("text/html", b"ok"),
    400: ("text/html", b"invalid_payload"),
    403: ("text/html", b"action_prohibited"),
    404: ("text/html", b"no_service"),
    410: ("text/html", b"channel_is_archived"),
    429: ("text/html", b"rate_limited"),
    500: ("text/html", b"internal_error"),
}
DISCORD_ANSWERS = {
    400: {"message": "Invalid Form Body", "code": 50035},
    401: {"message": "Invalid Webhook Token", "code": 50027},
    404: {"message": "Unknown Webhook", "code": 10015},
    429: {"message": "You are being rate limited.", "retry_after": 1.5, "global": False},
    500: {"message": "500: Internal Server Error", "code": 0},
}


class FakeChatWebhooks:
    """Incoming webhooks: ``url(provider)`` is a new webhook of ``slack``, ``msteams`` or
    ``discord``. An answer is a status or ``(status, headers)``, scripted per webhook URL
    (``script[url]``) or for all (``script[""]``). ``received``: (provider, URL, JSON)."""

    SUCCESS = {"slack": 200, "msteams": 202, "discord": 204}

    def __init__(self) -> None:
        self.script: dict[str, list[int | tuple[int, dict[str, str]]]] = {}
        self.received: list[tuple[str, str, dict[str, Any]]] = []
        self._made = 0
        fake = self

        class Handler(_Handler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                self.reply(*fake._answer(self.path, raw))

        self.server = _Recording(Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def connections(self) -> int:
        return self.server.connections

    def url(self, provider: str) -> str:
        self._made += 1
        paths = {
            "slack": f"/services/T0001/B{self._made:04d}/secret{self._made}",
            "msteams": f"/workflows/{self._made}/triggers/manual/paths/invoke?sig=s{self._made}",
            "discord": f"/api/webhooks/{self._made}/token{self._made}",
        }
        return f"{self.base}/{provider}{paths[provider]}"

    def __enter__(self) -> FakeChatWebhooks:
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, path: str, raw: bytes) -> tuple[int, bytes, dict[str, str]]:
        provider = path.split("/")[1]
        url = self.base + path
        with self.server.lock:
            self.received.append((provider, url, json.loads(raw)))
            queue = self.script.get(url) or self.script.get("") or []
            answer = queue.pop(0) if queue else self.SUCCESS.get(provider, 404)
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        if provider == "slack":
            content_type, body = SLACK_HOOK_ANSWERS.get(status, ("text/html", b""))
        elif provider == "discord" and status >= 300:
            content_type = "application/json"
            body = json.dumps(DISCORD_ANSWERS.get(status, {"message": "?", "code": 0})).encode()
        elif provider == "msteams" and status >= 300:
            content_type = "application/json"
            error = {"code": "TriggerRequestFailed" if status < 500 else "InternalError"}
            body = json.dumps({"error": {**error, "message": "refused"}}).encode()
        else:
            content_type, body = "text/plain", b""
        return status, body, {"Content-Type": content_type, **headers}
