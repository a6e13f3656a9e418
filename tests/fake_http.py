"""A local HTTP endpoint for the webhook node and status webhooks: records requests,
answers a script."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeEndpoint:
    """``responses``: what to answer in order (then 200 forever): a status code, or
    (status, extra headers) - a redirect's ``Location``, say; ``received``: (method,
    path, headers, raw body) of every request answered; ``arrived``: the headers of every
    request as it arrives. ``hold``: while set to an Event that is not set, every request
    waits for it before answering (a receiver that hangs).
    ``port``: listen there (a receiver started again where one was). ``delay_s``: every
    request takes this long to answer (a slow partner API); ``peak``: the most requests
    ever in flight at once, per the first segment of their path after ``/`` and the
    second (``/a/x`` counts under "a" and "a/x")."""

    def __init__(self, port: int = 0) -> None:
        self.responses: list[int | tuple[int, dict[str, str]]] = []
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        self.arrived: list[dict[str, str]] = []
        self.hold: threading.Event | None = None
        self.delay_s = 0.0
        self.peak: dict[str, int] = {}
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                groups = fake._groups(self.path)
                with fake._lock:
                    fake.arrived.append(dict(self.headers))
                    for group in groups:
                        now = fake._in_flight[group] = fake._in_flight.get(group, 0) + 1
                        fake.peak[group] = max(fake.peak.get(group, 0), now)
                hold = fake.hold
                if hold is not None:
                    hold.wait(timeout=120)
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                with fake._lock:
                    for group in groups:
                        fake._in_flight[group] -= 1
                with fake._lock:
                    fake.received.append((self.command, self.path, dict(self.headers), body))
                    answer = fake.responses.pop(0) if fake.responses else 200
                status, extra = answer if isinstance(answer, tuple) else (answer, {})
                data = b'{"ok": true}' if status < 300 else b'{"error": "nope"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PUT = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def _groups(path: str) -> list[str]:
        parts = path.split("?")[0].strip("/").split("/")
        return ["/".join(parts[: n + 1]) for n in range(min(2, len(parts)))]

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()
