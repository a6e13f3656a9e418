"""One POST on a kept-alive HTTP/1.1 connection, nothing more: the client of the status
webhook deliverer (``status_webhooks.delivery``) and of the push services that speak
HTTP/1.1 (FCM's v1 API, Web Push: ``executions.providers.push``).

The connections are plain sockets (TLS-wrapped for https) and each exchange is
``notifyflow.http1``'s: these POSTs need none of what a general client adds and pays for
per request (CPU per POST on a kept-alive loopback connection: httpx and urllib3's pool
cost more than ``http.client``, which costs ~2x ``http1``: ``bench/RESULTS.md``, issue 44):

- **No redirects**: a 3xx is an answer like another.
- **Timeouts**: the socket's, so the connect and each send and read wait at most
  ``timeout`` seconds.
- **TLS**: verified against the CA file ``cafile`` names (certifi's bundle unless the
  caller says otherwise) with the host name checked (what httpx did with ``trust_env``
  off); no proxy variables of the environment are read.
- **Bounded reads**: at most ``max_body`` bytes of a body are read (``http1`` bounds the
  status line and headers); a connection whose body was not read to its end is closed,
  never reused.
- **Connections kept per process** (made after the fork, in the worker child), per
  origin, last used first: a connection goes back to its origin's stack after a
  complete exchange and is taken again only if it was idle less than ``keepalive_s``
  (``KEEPALIVE_S`` unless the caller says otherwise) and the server has not closed it
  meanwhile (a readable idle socket is a closed one, or one that sent what nobody asked
  for). ``on_connect`` is called for each connection made (the providers count them:
  ``executions.providers.connections``).
"""

from __future__ import annotations

import http.client
import os
import select
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import certifi

from . import http1

# Idle connections older than this are closed, not reused (httpx's default expiry: a
# server or a middlebox may drop an idle connection without a word).
KEEPALIVE_S = 5.0
# Idle connections kept per origin: as many as a claim's concurrent POSTs to it.
MAX_IDLE_PER_ORIGIN = 100

Origin = tuple[str, str, int]
# Printable ASCII: what a request target keeps as is.
_ASCII = "".join(chr(code) for code in range(0x21, 0x7F))


@dataclass(frozen=True)
class Response:
    """What came back: the status, the start of the body (at most ``max_body`` bytes)
    and the headers (names in lower case)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def location(self) -> str:
        """The ``Location`` header: where a redirect (not followed) pointed."""
        return self.headers.get("location", "")


class Connections:
    """Kept-alive connections of this process by origin (thread-safe; rebuilt in a
    forked child, whose parent's sockets are not its own)."""

    def __init__(
        self,
        *,
        cafile: Callable[[], str] = certifi.where,
        keepalive_s: float = KEEPALIVE_S,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        self._idle: dict[Origin, list[tuple[socket.socket, float]]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._tls: ssl.SSLContext | None = None
        self._cafile = cafile
        self._keepalive_s = keepalive_s
        self._on_connect = on_connect

    def post(
        self,
        url: str,
        *,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        max_body: int,
    ) -> Response:
        """POST ``body`` to ``url`` (an http(s) URL the caller has checked). Raises
        ``TimeoutError`` when the server takes longer than ``timeout`` for one step,
        ``OSError`` or ``http.client.HTTPException`` when the exchange fails,
        ``ValueError`` for a header or host name that cannot be sent."""
        origin, request = _prepared(Post(url, body, headers))
        sock = self._take(origin, timeout)
        try:
            answer = http1.exchange(sock, request, max_body=max_body)
        except BaseException:
            sock.close()
            raise
        return self._finish(origin, sock, answer)

    def post_many(
        self, posts: Sequence[Post], *, timeout: float, max_body: int, parallel: int
    ) -> list[Sent]:
        """Every POST of ``posts``, in one thread, up to ``parallel`` of them in flight at
        once (a connection each): a request is written as soon as a connection is free
        and each answer is read as it arrives, so quick answers cost no thread handoff
        and slow ones overlap. Each POST's ``Sent`` in order: its response, or the
        exception ``post`` would have raised. An origin that could not be connected to
        fails the rest of its POSTs with the same error, without trying again."""
        parallel = max(1, parallel)  # 0 would never start one
        flight = _Flight(self, posts, timeout=timeout, max_body=max_body)
        todo = deque(range(len(posts)))
        with flight:
            while todo or flight.busy:
                while todo and len(flight.busy) < parallel:
                    flight.start(todo.popleft())
                flight.read_ready()
        return flight.done()

    def _finish(self, origin: Origin, sock: socket.socket, answer: http1.Answer) -> Response:
        if answer.reusable:
            self._give_back(origin, sock)
        else:  # unread body left, or the server said it closes: never reused
            sock.close()
        return Response(answer.status, answer.body, answer.headers)

    def close_all(self) -> None:
        """Close every idle connection of this process."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for stack in idle.values():
            for sock, _ in stack:
                sock.close()

    def _take(self, origin: Origin, timeout: float) -> socket.socket:
        now = time.monotonic()
        taken: socket.socket | None = None
        stale: list[socket.socket] = []
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = {}, os.getpid()
            stack = self._idle.get(origin)
            if stack:
                taken, since = stack.pop()
                if now - since >= self._keepalive_s:  # the last used is stale: all are
                    stale = [taken, *(sock for sock, _ in stack)]
                    stack.clear()
                    taken = None
        for sock in stale:
            sock.close()
        if taken is None or _dropped(taken):
            if taken is not None:
                taken.close()
            return self._new(origin, timeout)
        taken.settimeout(timeout)
        return taken

    def _give_back(self, origin: Origin, sock: socket.socket) -> None:
        with self._lock:
            stack = self._idle.setdefault(origin, [])
            if len(stack) < MAX_IDLE_PER_ORIGIN:
                stack.append((sock, time.monotonic()))
                return
        sock.close()

    def _new(self, origin: Origin, timeout: float) -> socket.socket:
        """A connection to ``origin``: TCP with Nagle off (a request is one write; its
        answer should not wait for an ACK), TLS with the host name checked for https."""
        scheme, host, port = origin
        if self._on_connect is not None:
            self._on_connect()
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                return self._tls_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            # Certificate and host name checked (create_default_context's defaults).
            self._tls = ssl.create_default_context(cafile=self._cafile())
        return self._tls


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle connection can no longer be used: closed, or readable (the
    server's FIN, or bytes nobody asked for)."""
    if sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


@dataclass(frozen=True)
class Post:
    """One POST to send: ``url`` checked by the caller."""

    url: str
    body: bytes
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Sent:
    """What one POST of ``post_many`` gave: a response, or the exception of its exchange;
    and how long it took (from its request written, or tried, to its answer read)."""

    response: Response | None
    error: Exception | None
    seconds: float


def _prepared(post: Post) -> tuple[Origin, bytes]:
    """The origin to connect to and the request's bytes."""
    parts = urlsplit(post.url)
    scheme = parts.scheme
    port = parts.port or (443 if scheme == "https" else 80)
    host = parts.hostname or ""
    if not host.isascii():  # an internationalised name, as DNS knows it
        host = host.encode("idna").decode("ascii")
    # Non-ASCII in the path or query is sent percent-encoded (UTF-8), as browsers do.
    target = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), _ASCII)
    name = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
    authority = name if port == (443 if scheme == "https" else 80) else f"{name}:{port}"
    request = http1.request_bytes(
        method="POST", target=target, host=authority, headers=post.headers, body=post.body
    )
    return (scheme, host, port), request


class _Flight:
    """The POSTs of one ``post_many``: those written and not yet answered (``busy``, by
    socket: index, origin, start, deadline), and every result so far."""

    def __init__(
        self, client: Connections, posts: Sequence[Post], *, timeout: float, max_body: int
    ) -> None:
        self.client, self.posts = client, posts
        self.timeout, self.max_body = timeout, max_body
        self.results: list[Sent | None] = [None] * len(posts)
        self.busy: dict[socket.socket, tuple[int, Origin, float, float]] = {}
        self.unreachable: dict[Origin, Exception] = {}
        self.selector = selectors.DefaultSelector()

    def __enter__(self) -> _Flight:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sock in self.busy:  # only when an exception cut the loop short
            sock.close()
        self.selector.close()

    def start(self, index: int) -> None:
        started = time.monotonic()
        origin: Origin | None = None
        try:
            origin, request = _prepared(self.posts[index])
            if origin in self.unreachable:
                raise self.unreachable[origin]
            try:
                sock = self.client._take(origin, self.timeout)
            except OSError as exc:
                self.unreachable[origin] = exc
                raise
        except (OSError, ValueError) as exc:
            self.results[index] = Sent(None, exc, time.monotonic() - started)
            return
        try:
            sock.sendall(request)
        except OSError as exc:
            sock.close()
            self.results[index] = Sent(None, exc, time.monotonic() - started)
            return
        self.busy[sock] = (index, origin, started, started + self.timeout)
        self.selector.register(sock, selectors.EVENT_READ)

    def read_ready(self) -> None:
        """Read the answers that have arrived (waiting for one at most until the earliest
        deadline), then fail those past their deadline."""
        if not self.busy:
            return
        wait = min(deadline for *_, deadline in self.busy.values()) - time.monotonic()
        for key, _ in self.selector.select(max(0.0, wait)):
            self._read(key.fileobj)  # type: ignore[arg-type]
        now = time.monotonic()
        for sock, (index, _, started, deadline) in list(self.busy.items()):
            if deadline <= now:
                self._drop(sock)
                sock.close()
                error = TimeoutError(f"no answer in {self.timeout:g} s")
                self.results[index] = Sent(None, error, now - started)

    def _read(self, sock: socket.socket) -> None:
        index, origin, started, deadline = self._drop(sock)
        try:
            # The rest of an answer that arrived in part is waited for until its deadline.
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            answer = http1.receive(sock, max_body=self.max_body)
        except (OSError, http.client.HTTPException) as exc:
            sock.close()
            self.results[index] = Sent(None, exc, time.monotonic() - started)
            return
        response = self.client._finish(origin, sock, answer)
        self.results[index] = Sent(response, None, time.monotonic() - started)

    def _drop(self, sock: socket.socket) -> tuple[int, Origin, float, float]:
        self.selector.unregister(sock)
        return self.busy.pop(sock)

    def done(self) -> list[Sent]:
        return [sent for sent in self.results if sent is not None]
