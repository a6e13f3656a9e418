"""A local fake of Twilio's Messages API, for driving the real ``twilio`` client."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs


class FakeTwilio:
    """Answers POST /2010-04-01/Accounts/{sid}/Messages.json.

    ``responses`` is a script of status codes to answer in order (then 201 forever);
    ``received`` lists every form posted (To, From, Body).
    """

    def __init__(self) -> None:
        self.responses: list[int] = []
        self.received: list[dict[str, str]] = []
        self.accepted: list[str] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                with fake._lock:
                    fake.received.append(form)
                    status = fake.responses.pop(0) if fake.responses else 201
                if not self.path.endswith("/Messages.json"):
                    status = 404
                if status == 201:
                    sid = "SM" + uuid.uuid4().hex
                    with fake._lock:
                        fake.accepted.append(sid)
                    body = {
                        "sid": sid,
                        "status": "queued",
                        "to": form.get("To"),
                        "from": form.get("From"),
                        "body": form.get("Body"),
                    }
                else:
                    body = {
                        "code": 21211 if status < 500 else 20500,
                        "message": "Invalid 'To' Phone Number"
                        if status < 500
                        else "Internal Server Error",
                        "more_info": "https://www.twilio.com/docs/errors",
                        "status": status,
                    }
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeTwilio:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
