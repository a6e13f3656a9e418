"""The webhook scenario's loopback receiver: a stand-in endpoint that must answer
every POST the deliverer sends, on kept-alive connections, whatever way its bytes
arrive."""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from bench.scenarios.status_webhooks import Receiver


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def _post(conn: http.client.HTTPConnection, body: bytes) -> int:
    conn.request("POST", "/hooks", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    return response.status


def test_answers_every_post_on_one_kept_alive_connection(receiver):
    conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
    statuses = [_post(conn, b'{"n": %d}' % i) for i in range(3)]
    conn.close()

    assert statuses == [204, 204, 204]
    assert receiver.count == 3


def test_answers_only_once_the_whole_body_has_arrived(receiver):
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(b"POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
        time.sleep(0.2)
        early = receiver.count
        sock.sendall(b"67890")
        answer = sock.recv(100)

    assert early == 0
    assert answer.startswith(b"HTTP/1.1 204")
    assert receiver.count == 1


def test_two_requests_in_one_write_get_two_answers(receiver):
    request = b"POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(request * 2)
        answers = b""
        while answers.count(b"204") < 2:
            answers += sock.recv(100)

    assert receiver.count == 2


def test_closes_the_connection_when_the_request_asks(receiver):
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(b"POST /hooks HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(100):
            answer += chunk

    assert answer.startswith(b"HTTP/1.1 204")


def test_reports_the_cpu_its_thread_spent(receiver):
    before = receiver.cpu_s()
    conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
    for _ in range(200):
        _post(conn, b"{}")
    conn.close()

    assert receiver.cpu_s() > before
