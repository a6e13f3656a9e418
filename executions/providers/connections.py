"""The push and chat providers' HTTP clients: one per process and provider, kept alive,
trusting what ``SSL_CERT_FILE`` names, and counting the connections they open.

A 100,000-device push must not open 100,000 TLS connections: each worker process builds
one client per provider on first use and keeps it, with as many kept-alive connections
as it has had requests in flight at once (``ConnectionPerSender``): one for a process that
sends one at a time. ``connections_opened()`` (and the metric
``notifyflow_provider_connections_total{provider}``) counts the TCP connections actually
opened, so a bench or an operator can check that it stays per process, not per device.

Clients are rebuilt in a forked child (a connection must never be shared with the parent)
and when a provider setting changes (tests); ``close_all()`` drops them all.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import certifi
import httpx
import requests
from django.core.signals import setting_changed
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from notifyflow import metrics
from notifyflow.http_client import Connections

T = TypeVar("T")

# Settings whose change rebuilds the clients.
SETTING_PREFIXES = (
    "NOTIFYFLOW_FCM_",
    "NOTIFYFLOW_APNS_",
    "NOTIFYFLOW_VAPID_",
    "NOTIFYFLOW_SLACK_",
    "NOTIFYFLOW_PUSH_",
    "NOTIFYFLOW_CHAT_",
)

_opened: Counter[str] = Counter()
_opened_lock = threading.Lock()


def connection_opened(provider: str) -> None:
    with _opened_lock:
        _opened[provider] += 1
    metrics.PROVIDER_CONNECTIONS.labels(provider).inc()


def connections_opened(provider: str) -> int:
    """How many connections this process has opened to ``provider`` since it started."""
    with _opened_lock:
        return _opened[provider]


def ca_bundle() -> str:
    """The CA file TLS connections to providers trust: ``SSL_CERT_FILE`` when set (the
    standard variable; a private CA, a test CA), else certifi's bundle."""
    return os.environ.get("SSL_CERT_FILE") or certifi.where()


def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_bundle())


def tracer(provider: str) -> Callable[[str, dict[str, Any]], None]:
    """An httpcore ``trace`` extension counting each TCP connection a request opened."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            connection_opened(provider)

    return trace


class ConnectionPerSender(httpx.BaseTransport):
    """Transports of which each carries one request at a time: as many kept-alive
    connections as requests this process has had in flight at once, each reused.

    httpcore's synchronous HTTP/2 connection is not safe for threads that share it: it
    takes a stream id and sends that stream's headers under different locks (stream 5
    can reach the server before stream 3, a connection error by RFC 9113 §5.1.1), and
    one thread reads the TLS socket while another writes it. Threads multiplexing one
    connection lost about 1 request in 20 to "Server disconnected"
    (``tests/executions/providers/test_connections.py``). A step's sends to several
    devices overlap from the send threads (``executions.target_sends``), so each of them
    takes a connection of its own, and gives it back once the answer is read; a process
    sending one request at a time keeps one connection.
    """

    def __init__(self, make: Callable[[], httpx.BaseTransport]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._free: list[httpx.BaseTransport] = []
        self._made: list[httpx.BaseTransport] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            transport = self._free.pop() if self._free else None
        if transport is None:
            transport = self._make()
            with self._lock:
                self._made.append(transport)
        try:
            response = transport.handle_request(request)
        except BaseException:
            self._give_back(transport)
            raise
        response.stream = _GivenBackOnClose(response.stream, lambda: self._give_back(transport))
        return response

    def _give_back(self, transport: httpx.BaseTransport) -> None:
        with self._lock:
            if transport in self._made:  # not closed meanwhile
                self._free.append(transport)  # the last given back is the next taken

    def close(self) -> None:
        with self._lock:
            made, self._made, self._free = self._made, [], []
        for transport in made:
            transport.close()


class _GivenBackOnClose(httpx.SyncByteStream):
    def __init__(self, stream: Any, give_back: Callable[[], None]) -> None:
        self._stream = stream
        self._give_back: Callable[[], None] | None = give_back

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            give_back, self._give_back = self._give_back, None
            if give_back is not None:
                give_back()


def http_client(*, timeout_s: float, http2: bool = True) -> httpx.Client:
    """A kept-alive httpx client: HTTP/2 when the server offers it (ALPN), idle
    connections kept for minutes (APNs asks for long-lived connections), no redirects,
    and no proxy or CA variables of the environment but ``SSL_CERT_FILE``; threads may
    share it (``ConnectionPerSender``)."""
    verify = tls_context()

    def transport() -> httpx.BaseTransport:
        return httpx.HTTPTransport(
            verify=verify,
            http2=http2,
            trust_env=False,
            limits=httpx.Limits(max_connections=1, keepalive_expiry=300),
        )

    return httpx.Client(
        transport=ConnectionPerSender(transport),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(timeout_s),
    )


# How long a push service's idle HTTP/1.1 connection is kept for the next send (one
# closed by the server meanwhile is noticed before reuse: notifyflow.http_client).
KEEPALIVE_S = 120.0
# Most of an answer's body read (FCM's and the push services' answers are small JSON).
MAX_ANSWER_BYTES = 64 * 1024


def http1_client(provider: str) -> Connections:
    """A kept-alive HTTP/1.1 client (``notifyflow.http_client``) for a provider that
    speaks it (FCM's v1 API, Web Push): no redirects, no proxy variables, trusting what
    ``SSL_CERT_FILE`` names, each connection it makes counted. A quarter of httpx's CPU
    per request (bench/RESULTS.md, issue 44); threads may share it (a connection per
    request in flight, as ``ConnectionPerSender``)."""
    return Connections(
        cafile=ca_bundle, keepalive_s=KEEPALIVE_S, on_connect=lambda: connection_opened(provider)
    )


def _counting_pools(provider: str) -> dict[str, type[HTTPConnectionPool]]:
    """urllib3 pool classes whose connections count each time they connect (a kept
    connection that the server closed connects again, and counts again)."""

    class Http(HTTPConnection):
        def connect(self) -> None:
            super().connect()
            connection_opened(provider)

    class Https(HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            connection_opened(provider)

    class HttpPool(HTTPConnectionPool):
        ConnectionCls = Http

    class HttpsPool(HTTPSConnectionPool):
        ConnectionCls = Https

    return {"http": HttpPool, "https": HttpsPool}


class CountingAdapter(HTTPAdapter):
    """requests' adapter whose connections count as opened to ``provider``."""

    def __init__(self, provider: str, **kwargs: Any) -> None:
        self.provider = provider  # before super().__init__, which builds the pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _counting_pools(self.provider)


def requests_session(provider: str) -> requests.Session:
    """A kept-alive requests session (for the libraries that take one) trusting
    ``SSL_CERT_FILE`` and counting its connections. ``trust_env`` off: requests would
    otherwise prefer ``REQUESTS_CA_BUNDLE`` over the session's CA file, and read proxy
    variables the other provider clients do not."""
    session = requests.Session()
    session.trust_env = False
    session.verify = ca_bundle()
    adapter = CountingAdapter(provider, pool_connections=32, pool_maxsize=4)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


class ProcessClients:
    """Provider clients of this process, built once by ``get`` (under a lock: two threads
    never build two), again after a fork or ``close_all``."""

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def get(self, provider: str, build: Callable[[], T]) -> T:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._clients, self._pid = {}, os.getpid()
            client = self._clients.get(provider)
            if client is None:
                client = self._clients[provider] = build()
            return client

    def close_all(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            close = getattr(client, "close", None)
            if callable(close):
                close()


clients = ProcessClients()


def close_all() -> None:
    """Close and forget every provider client of this process."""
    clients.close_all()


def _reset_clients(**kwargs: Any) -> None:
    if kwargs.get("setting", "").startswith(SETTING_PREFIXES):
        clients.close_all()


setting_changed.connect(_reset_clients)
