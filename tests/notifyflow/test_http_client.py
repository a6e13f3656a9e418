"""The kept-alive HTTP/1.1 client (status webhooks, FCM, Web Push) against real local
servers: one kept-alive connection per origin, a connection the server closed while idle
replaced without a failed POST, a connection idle past the keep-alive replaced, a body
read no further than the cap (and its connection not reused), an untrusted certificate
refused and the caller's CA trusted, a redirect returned, not followed, the answer's
headers, every connection made reported; many POSTs at once on one thread, each failure
its own result."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifyflow.http_client import Connections, Post, Sent
from tests.fake_tls import make_local_ca, wrap_handler_socket


class Receiver:
    """An HTTP/1.1 server (keep-alive) counting the connections it accepted and the
    POSTs it answered. ``close_idle``: closes each connection after its answer without
    saying so (what a server's idle timeout does); ``body``: the answer's body;
    ``tls``: serve over TLS with this context."""

    def __init__(
        self, *, close_idle: bool = False, body: bytes = b"", tls: ssl.SSLContext | None = None
    ) -> None:
        self.connections = 0
        self.posts = 0
        self.paths: list[str] = []
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                if tls is not None:
                    wrap_handler_socket(self, tls)
                super().setup()
                with lock:
                    receiver.connections += 1

            def do_POST(self):  # noqa: N802 - http.server's name
                receiver.paths.append(self.path)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    receiver.posts += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Retry-After", "7")
                if self.path == "/moved":
                    self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = close_idle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make(**kwargs) -> Receiver:
        made.append(Receiver(**kwargs))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def _post(client: Connections, url: str, *, max_body: int = 4000):
    return client.post(url, body=b"{}", headers={"webhook-id": "x"}, timeout=5, max_body=max_body)


def test_posts_to_one_origin_reuse_one_kept_alive_connection(receivers):
    receiver = receivers()
    client = Connections()
    for path in ("/a", "/b", "/a?x=1", "/c", "/a"):
        assert _post(client, receiver.url + path).status == 200
    assert receiver.posts == 5 and receiver.connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_not_failed(receivers):
    receiver = receivers(close_idle=True)
    client = Connections()
    for _ in range(3):
        assert _post(client, receiver.url + "/hooks").status == 200
        time.sleep(0.05)  # the server's close reaches the idle connection
    assert receiver.posts == 3 and receiver.connections == 3


def test_a_body_is_read_up_to_the_cap_and_its_connection_is_then_not_reused(receivers):
    receiver = receivers(body=b"x" * 1_000_000)
    client = Connections()
    first = _post(client, receiver.url + "/big", max_body=4000)
    assert first.status == 200 and first.body == b"x" * 4000
    assert _post(client, receiver.url + "/big", max_body=4000).status == 200
    assert receiver.connections == 2  # the unread rest was never read, nor reused


def test_a_whole_body_under_the_cap_keeps_the_connection(receivers):
    receiver = receivers(body=b'{"ok": true}')
    client = Connections()
    assert _post(client, receiver.url).body == b'{"ok": true}'
    assert _post(client, receiver.url).body == b'{"ok": true}'
    assert receiver.connections == 1


def test_a_redirect_is_returned_not_followed(receivers):
    receiver = receivers()
    response = _post(Connections(), receiver.url + "/moved")
    assert response.location == "http://127.0.0.1:1/elsewhere"
    assert receiver.posts == 1


def test_the_answers_headers_come_back_by_lower_case_name(receivers):
    response = _post(Connections(), receivers().url + "/x")
    assert response.headers["retry-after"] == "7"
    assert response.headers["content-length"] == "0"
    assert response.location == ""


def test_a_connection_idle_past_the_keep_alive_is_replaced(receivers):
    receiver = receivers()
    client = Connections(keepalive_s=0.1)
    _post(client, receiver.url)
    _post(client, receiver.url)
    time.sleep(0.15)
    _post(client, receiver.url)
    assert receiver.connections == 2


def test_every_connection_made_is_reported(receivers):
    made: list[int] = []
    client = Connections(on_connect=lambda: made.append(1))
    first, second = receivers(), receivers(close_idle=True)
    for _ in range(2):
        _post(client, first.url)
        _post(client, second.url)
        time.sleep(0.05)  # the second server's close reaches its idle connection
    assert len(made) == first.connections + second.connections == 3


def test_a_certificate_no_trusted_authority_signed_is_refused(receivers, tmp_path):
    ca = make_local_ca(tmp_path)
    receiver = receivers(tls=ca.server_context(["http/1.1"]))
    with pytest.raises(ssl.SSLCertVerificationError):
        _post(Connections(), receiver.url + "/hooks")
    assert receiver.posts == 0


def test_the_callers_certificate_authority_is_trusted(receivers, tmp_path):
    ca = make_local_ca(tmp_path)
    receiver = receivers(tls=ca.server_context(["http/1.1"]))
    client = Connections(cafile=lambda: str(ca.ca_file))
    assert _post(client, receiver.url + "/hooks").status == 200
    assert receiver.posts == 1


def test_a_server_that_does_not_answer_in_time_raises_a_timeout(receivers):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts (the kernel does) and never answers
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            Connections().post(
                f"http://127.0.0.1:{listener.getsockname()[1]}/",
                body=b"{}",
                headers={},
                timeout=0.3,
                max_body=10,
            )
        assert time.monotonic() - started < 2
    finally:
        listener.close()


def test_a_path_with_non_ascii_characters_is_sent_percent_encoded(receivers):
    receiver = receivers()
    assert _post(Connections(), receiver.url + "/hööks?ä=1").status == 200
    assert receiver.paths == ["/h%C3%B6%C3%B6ks?%C3%A4=1"]


def _posts(url: str, paths: list[str]) -> list[Post]:
    return [Post(url + path, b"{}", {"webhook-id": path}) for path in paths]


def test_many_posts_are_answered_in_order_on_at_most_parallel_connections(receivers):
    receiver = receivers(body=b"ok")
    paths = [f"/{n}" for n in range(12)]
    sent = Connections().post_many(_posts(receiver.url, paths), timeout=5, max_body=100, parallel=3)
    assert [(s.response.status, s.response.body) for s in sent if s.response] == [(200, b"ok")] * 12
    assert sorted(receiver.paths) == sorted(paths)
    assert 1 <= receiver.connections <= 3


def test_a_parallel_below_one_still_sends_one_at_a_time(receivers):
    receiver = receivers(body=b"ok")
    result: list[list[Sent]] = []
    worker = threading.Thread(
        target=lambda: result.append(
            Connections().post_many(
                _posts(receiver.url, ["/a", "/b"]), timeout=5, max_body=100, parallel=0
            )
        ),
        daemon=True,
    )
    worker.start()
    worker.join(10)
    assert result, "post_many did not return"
    assert [s.response.status for s in result[0] if s.response] == [200, 200]
    assert receiver.connections == 1


def test_a_post_that_fails_is_its_result_and_the_others_are_still_sent(receivers):
    receiver = receivers()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
    made: list[int] = []
    posts = [
        *_posts(receiver.url, ["/a"]),
        *_posts(refused, ["/x", "/y"]),
        *_posts(receiver.url, ["/b"]),
    ]
    sent = Connections(on_connect=lambda: made.append(1)).post_many(
        posts, timeout=5, max_body=100, parallel=4
    )
    assert [s.response.status if s.response else type(s.error) for s in sent] == [
        200,
        ConnectionRefusedError,
        ConnectionRefusedError,
        200,
    ]
    assert sent[1].error is sent[2].error  # the origin was tried once
    assert len(made) == 1 + receiver.connections


def test_a_post_not_answered_in_time_times_out_while_the_others_are_answered(receivers):
    receiver = receivers()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts (the kernel does) and never answers
    silent = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        started = time.monotonic()
        sent = Connections().post_many(
            [*_posts(silent, ["/never"]), *_posts(receiver.url, ["/a", "/b"])],
            timeout=0.3,
            max_body=100,
            parallel=3,
        )
        assert time.monotonic() - started < 2
    finally:
        listener.close()
    assert isinstance(sent[0].error, TimeoutError) and sent[0].seconds >= 0.3
    assert [s.response.status for s in sent[1:] if s.response] == [200, 200]
