"""One HTTP/1.1 exchange on a connected socket: the request written in one ``sendall``,
the answer read with as few calls as it takes (usually one ``recv``). The wire format
of ``notifyflow.http_client``'s POSTs.

Written here rather than through ``http.client`` because its request and answer
machinery (header validation per call, a file object over the socket, the email
package's header parser) cost about 150 us of CPU a POST on a kept-alive loopback
connection against this module's 30-40 us (the raw ``sendall`` + ``recv`` floor is
~40 us; h11, the sans-I/O parser httpcore uses, ~170 us: ``bench/RESULTS.md``, issue 44,
seventh round). What an answer may be is read as RFC 9112 says, and only that:

- a status line ``HTTP/1.x NNN reason``; interim answers (1xx but 101) are skipped;
- header lines, obsolete line folding joined, repeated names joined with ", ", names in
  lower case, at most ``MAX_HEAD`` bytes of status line and headers together;
- a body delimited by ``Transfer-Encoding: chunked``, ``Content-Length`` or the end of
  the connection; none for 1xx, 204, 304. At most ``max_body`` bytes are read; an answer
  whose body was cut there, delimited by the connection's end, marked
  ``Connection: close``, of HTTP/1.0, or followed by bytes nobody asked for leaves the
  connection unusable (``Answer.reusable``).

Errors are ``http.client``'s exceptions (``BadStatusLine``, ``LineTooLong``,
``IncompleteRead``, ``RemoteDisconnected``), so callers catch what they caught before;
a slow server raises the socket's ``TimeoutError``.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Mapping
from dataclasses import dataclass

# Status line and headers together (http.client allows 100 lines of 64 KiB; no answer
# these clients read comes near this).
MAX_HEAD = 64 * 1024
# One chunk-size line (hex digits and extensions).
MAX_CHUNK_LINE = 1024
_RECV = 64 * 1024
# Answers that never carry a body (RFC 9112 §6.3); a POST's answer otherwise may.
_NO_BODY = frozenset({204, 304})


@dataclass(frozen=True)
class Answer:
    """What came back, and whether the connection can carry the next request."""

    status: int
    body: bytes
    headers: dict[str, str]
    reusable: bool


def request_bytes(
    *, method: str, target: str, host: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    """The request's bytes: ``target`` already percent-encoded (printable ASCII), the
    ``Host`` and ``Content-Length`` headers added. Raises ``ValueError`` for a header
    that would split the request (a CR or LF in a name or value, a colon in a name)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    for name, value in headers.items():
        if _splits(name) or ":" in name or not name or _splits(value):
            raise ValueError(f"header {name!r} has a character a header cannot carry")
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1") + body


def _splits(text: str) -> bool:
    return "\r" in text or "\n" in text


def exchange(sock: socket.socket, request: bytes, *, max_body: int) -> Answer:
    """Send ``request`` on ``sock`` and read its answer (``max_body`` bytes of body at
    most)."""
    sock.sendall(request)
    return receive(sock, max_body=max_body)


def receive(sock: socket.socket, *, max_body: int) -> Answer:
    """Read the answer to the request sent on ``sock`` (``max_body`` bytes of body at
    most)."""
    reader = _Reader(sock)
    while True:
        status, version, headers = _head(reader)
        if not (100 <= status < 200) or status == 101:
            break
    keep = version == "HTTP/1.1" and "close" not in _tokens(headers.get("connection", ""))
    if status == 101:  # another protocol follows on this connection: never ours again
        return Answer(status, b"", headers, False)
    if status in _NO_BODY:
        return Answer(status, b"", headers, keep and not reader.buffer)
    if "chunked" in _tokens(headers.get("transfer-encoding", "")):
        body, whole = _chunked(reader, max_body)
    elif "content-length" in headers:
        body, whole = _sized(reader, _length(headers["content-length"]), max_body)
    else:  # delimited by the connection's end: never reused
        body, whole, keep = _to_end(reader, max_body), False, False
    return Answer(status, body, headers, keep and whole and not reader.buffer)


class _Reader:
    """The answer's bytes as they arrive: ``buffer`` holds what was received and not yet
    consumed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def fill(self) -> bool:
        """Receive more; False at the connection's end."""
        chunk = self.sock.recv(_RECV)
        self.buffer += chunk
        return bool(chunk)

    def until(self, marker: bytes, *, limit: int, what: str) -> bytes:
        """The bytes before ``marker`` (consumed with it), at most ``limit`` of them."""
        start = 0
        while (end := self.buffer.find(marker, start)) < 0:
            if len(self.buffer) > limit:
                raise http.client.LineTooLong(what)
            start = max(0, len(self.buffer) - len(marker) + 1)
            if not self.fill():
                raise http.client.IncompleteRead(self.buffer)
        if end > limit:
            raise http.client.LineTooLong(what)
        found, self.buffer = self.buffer[:end], self.buffer[end + len(marker) :]
        return found

    def take(self, size: int) -> bytes:
        """Exactly ``size`` bytes."""
        while len(self.buffer) < size:
            if not self.fill():
                raise http.client.IncompleteRead(self.buffer, size - len(self.buffer))
        taken, self.buffer = self.buffer[:size], self.buffer[size:]
        return taken


def _head(reader: _Reader) -> tuple[int, str, dict[str, str]]:
    if not reader.buffer and not reader.fill():
        raise http.client.RemoteDisconnected("the server closed the connection unanswered")
    head = reader.until(b"\r\n\r\n", limit=MAX_HEAD, what="answer head").decode("latin-1")
    status_line, *lines = head.split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit() or rest[3:4] not in ("", " "):
        raise http.client.BadStatusLine(status_line)
    headers: dict[str, str] = {}
    name = ""
    for line in lines:
        if line[:1] in (" ", "\t") and name:  # obsolete folding: part of the last value
            headers[name] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise http.client.BadStatusLine(f"not a header line: {line!r}")
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return int(code), version, headers


def _tokens(value: str) -> set[str]:
    return {token.strip().lower() for token in value.split(",")}


def _length(value: str) -> int:
    # Repeated identical values are one length (RFC 9110 §8.6); anything else is invalid.
    values = {part.strip() for part in value.split(",")}
    if len(values) != 1 or not (length := values.pop()).isdigit():
        raise http.client.BadStatusLine(f"Content-Length: {value}")
    return int(length)


def _sized(reader: _Reader, length: int, max_body: int) -> tuple[bytes, bool]:
    if length > max_body:
        return reader.take(max_body), False
    return reader.take(length), True


def _chunked(reader: _Reader, max_body: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    kept = 0
    while True:
        line = reader.until(b"\r\n", limit=MAX_CHUNK_LINE, what="chunk size")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise http.client.IncompleteRead(b"".join(parts)) from None
        if size == 0:
            break
        if kept + size > max_body:
            parts.append(reader.take(max_body - kept))
            return b"".join(parts), False
        parts.append(reader.take(size))
        reader.take(2)  # the chunk's CRLF
        kept += size
    while reader.until(b"\r\n", limit=MAX_HEAD, what="trailer"):  # trailers, unused
        pass
    return b"".join(parts), True


def _to_end(reader: _Reader, max_body: int) -> bytes:
    while len(reader.buffer) < max_body and reader.fill():
        pass
    return reader.buffer[:max_body]
