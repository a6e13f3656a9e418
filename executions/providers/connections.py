"""The push and chat providers' HTTP clients: one per process and provider, kept alive,
trusting what ``SSL_CERT_FILE`` names, and counting the connections they open.

A 100,000-device push must not open 100,000 TLS connections: each worker process builds
one client per provider on first use (HTTP/2 for APNs and FCM, so one connection carries
every concurrent request) and keeps it. ``connections_opened()`` (and the metric
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
from collections.abc import Callable
from typing import Any, TypeVar

import certifi
import httpx
import requests
from django.core.signals import setting_changed
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from notifyflow import metrics

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


def http_client(*, timeout_s: float, http2: bool = True) -> httpx.Client:
    """A kept-alive httpx client: HTTP/2 when the server offers it (ALPN), idle
    connections kept for minutes (APNs asks for long-lived connections), no redirects,
    and no proxy or CA variables of the environment but ``SSL_CERT_FILE``."""
    return httpx.Client(
        http2=http2,
        verify=tls_context(),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(timeout_s),
        limits=httpx.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=300
        ),
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
