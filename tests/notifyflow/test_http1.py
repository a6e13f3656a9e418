"""The HTTP/1.1 exchange of the kept-alive client, byte for byte: the request it writes,
and the answers it reads as RFC 9112 frames them (sized, chunked, to the connection's
end, interim answers, folded and repeated headers), bounded, with whether the connection
can carry the next request. The answers are scripted on the other end of a socket pair,
written in pieces to show the reader does not depend on one ``recv``."""

from __future__ import annotations

import http.client
import socket
import threading

import pytest

from notifyflow import http1

REQUEST = http1.request_bytes(
    method="POST", target="/hooks", host="example.test", headers={"X-A": "1"}, body=b"{}"
)


def _answer(
    *pieces: bytes, max_body: int = 1000, close: bool = False
) -> tuple[http1.Answer, bytes]:
    """The exchange's answer when the server writes ``pieces`` one after another (then
    closes, if ``close``), and what the server read of the request."""
    client, server = socket.socketpair()
    client.settimeout(5)
    received: list[bytes] = []

    def serve() -> None:
        received.append(server.recv(65536))
        for piece in pieces:
            server.sendall(piece)
        if close:
            server.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        return http1.exchange(client, REQUEST, max_body=max_body), b"".join(received)
    finally:
        thread.join(5)
        client.close()
        server.close()


def test_the_request_is_one_message_with_host_and_length_and_the_callers_headers():
    _, received = _answer(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert received == (
        b"POST /hooks HTTP/1.1\r\nHost: example.test\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n{}"
    )


@pytest.mark.parametrize(
    "headers",
    [{"X-A": "1\r\nX-Injected: 1"}, {"X-A\nB": "1"}, {"X:A": "1"}, {"": "1"}],
)
def test_a_header_that_would_split_the_request_is_refused(headers):
    with pytest.raises(ValueError, match="cannot carry"):
        http1.request_bytes(method="POST", target="/", host="h", headers=headers, body=b"")


def test_a_sized_body_read_whole_keeps_the_connection():
    answer, _ = _answer(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", b"Retry-After: 7\r\n\r\nhel", b"lo"
    )
    assert (answer.status, answer.body, answer.reusable) == (200, b"hello", True)
    assert answer.headers == {"content-length": "5", "retry-after": "7"}


def test_a_sized_body_over_the_cap_is_cut_and_its_connection_not_reused():
    answer, _ = _answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", max_body=4)
    assert (answer.body, answer.reusable) == (b"0123", False)


def test_a_chunked_body_is_joined_and_its_trailers_consumed():
    answer, _ = _answer(
        b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n",
        b"0\r\nX-Trailer: t\r\n\r\n",
    )
    assert (answer.status, answer.body, answer.reusable) == (400, b"hello world", True)


def test_a_chunked_body_over_the_cap_is_cut_and_its_connection_not_reused():
    answer, _ = _answer(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n",
        max_body=7,
    )
    assert (answer.body, answer.reusable) == (b"hellowo", False)


def test_a_body_delimited_by_the_connections_end_is_read_and_the_connection_dropped():
    answer, _ = _answer(b"HTTP/1.1 200 OK\r\n\r\nall of ", b"it", close=True)
    assert (answer.body, answer.reusable) == (b"all of it", False)


def test_interim_answers_are_skipped():
    answer, _ = _answer(
        b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    )
    assert (answer.status, answer.reusable) == (201, True)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\nunasked",
    ],
    ids=["connection-close", "http-1.0", "bytes-nobody-asked-for"],
)
def test_a_connection_the_answer_ends_is_not_reused(head):
    assert _answer(head)[0].reusable is False


def test_folded_and_repeated_headers_are_joined_by_lower_case_name():
    answer, _ = _answer(
        b"HTTP/1.1 204 No Content\r\nVary: a\r\nX-Long: one\r\n two\r\nvary: b\r\n\r\n"
    )
    assert answer.headers == {"vary": "a, b", "x-long": "one two"}


@pytest.mark.parametrize(
    ("pieces", "error"),
    [
        ((b"garbage\r\n\r\n",), http.client.BadStatusLine),
        ((b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",), http.client.BadStatusLine),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",), http.client.BadStatusLine),
        ((b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",), http.client.IncompleteRead),
        ((), http.client.RemoteDisconnected),
    ],
    ids=["status-line", "header-line", "content-length", "short-body", "no-answer"],
)
def test_a_malformed_or_cut_answer_raises_http_clients_error(pieces, error):
    with pytest.raises(error):
        _answer(*pieces, close=True)


def test_a_head_longer_than_the_limit_raises_without_reading_on():
    huge = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (http1.MAX_HEAD + 10)
    with pytest.raises(http.client.LineTooLong):
        _answer(huge, close=True)
