"""The providers' clients: one per process and provider, rebuilt when a provider setting
changes; TLS trust from SSL_CERT_FILE; connections counted, in-process and in the
metric."""

from __future__ import annotations

import threading

import httpx
import pytest

from executions.providers import connections
from notifyflow import metrics
from tests.fake_chat import FakeChatWebhooks
from tests.fake_tls import H2Answer, H2Server, make_local_ca


class Closable:
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_client_is_built_once_even_by_racing_threads():
    clients = connections.ProcessClients()
    built = []

    def build():
        built.append(1)
        return Closable()

    threads = [threading.Thread(target=clients.get, args=("x", build)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1
    client = clients.get("x", build)
    clients.close_all()
    assert client.closed == 1
    assert clients.get("x", build) is not client


def test_a_provider_setting_change_closes_the_clients(settings):
    client = connections.clients.get("probe", Closable)
    settings.NOTIFYFLOW_SLACK_API_URL = "http://127.0.0.1:9/api/"
    assert client.closed == 1
    assert connections.clients.get("probe", Closable) is not client
    connections.close_all()


def test_tls_trust_follows_ssl_cert_file(monkeypatch, tmp_path):
    ca = make_local_ca(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))
    assert connections.ca_bundle() == str(ca.ca_file)
    subjects = [dict(c["subject"][0]) for c in connections.tls_context().get_ca_certs()]
    assert subjects == [{"commonName": "NotifyFlow test CA"}]
    session = connections.requests_session("probe")
    assert (session.verify, session.trust_env) == (str(ca.ca_file), False)
    monkeypatch.delenv("SSL_CERT_FILE")
    assert connections.ca_bundle().endswith("cacert.pem")  # certifi's


def metric_value(provider: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "notifyflow_provider_connections_total", {"provider": provider}
    )
    return value or 0.0


def test_connections_are_counted_by_httpx_and_requests_clients():
    before = connections.connections_opened("probe-httpx"), metric_value("probe-httpx")
    with FakeChatWebhooks() as fake, connections.http_client(timeout_s=5) as client:
        url = fake.url("discord")
        for _ in range(3):
            client.post(url, json={}, extensions={"trace": connections.tracer("probe-httpx")})
        session = connections.requests_session("probe-requests")
        for _ in range(3):
            session.post(url, json={}, timeout=5)
        session.close()
    assert connections.connections_opened("probe-httpx") - before[0] == 1
    assert metric_value("probe-httpx") - before[1] == 1
    assert connections.connections_opened("probe-requests") == 1
    assert fake.connections == 2


def test_threads_sharing_an_http2_client_each_take_a_kept_connection(trusted):
    """Ten threads at a time sharing one client, 1,500 requests: every one answered, on
    at most one connection per request in flight, each kept (when they multiplexed one
    HTTP/2 connection, about 1 in 20 failed with "Server disconnected")."""
    server = H2Server(
        lambda request: H2Answer(200, body=request.body), trusted.server_context(["h2"])
    )
    statuses: list[int] = []
    failures: list[Exception] = []

    def post(client, n: int) -> None:
        try:
            statuses.append(client.post(f"{server.url}/echo", content=str(n).encode()).status_code)
        except httpx.HTTPError as exc:
            failures.append(exc)

    server.start()
    try:
        with connections.http_client(timeout_s=10) as client:
            post(client, -1)
            assert server.tls_connections == 1
            for round_ in range(150):
                threads = [
                    threading.Thread(target=post, args=(client, round_ * 10 + n)) for n in range(10)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            opened = server.tls_connections
            for n in range(20):  # one at a time again: no new connection
                post(client, 1500 + n)
    finally:
        server.close()
    assert failures == []
    assert statuses == [200] * 1521
    assert 1 <= opened <= 10
    assert server.tls_connections == opened


def test_a_failed_request_leaves_the_client_usable(trusted):
    with FakeChatWebhooks() as fake, connections.http_client(timeout_s=2) as client:
        with pytest.raises(httpx.ConnectError):
            client.post("http://127.0.0.1:9/", json={})  # nothing listens on the discard port
        assert client.post(fake.url("discord"), json={}).status_code < 300
