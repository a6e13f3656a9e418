"""A local HTTP endpoint for the webhook node: records requests, answers a script."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeEndpoint:
    """``responses``: status codes to answer in order (then 200 forever); ``received``:
    (method, path, headers, raw body) of every request."""

    def __init__(self) -> None:
        self.responses: list[int] = []
        self.received: list[tuple[str, str, dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with fake._lock:
                    fake.received.append((self.command, self.path, dict(self.headers), body))
                    status = fake.responses.pop(0) if fake.responses else 200
                data = b'{"ok": true}' if status < 300 else b'{"error": "nope"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PUT = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
