"""TLS for the fake providers: a test CA with a server certificate for 127.0.0.1 and
localhost (made with ``cryptography`` at test time), an HTTP/2 server over TLS built on
the ``h2`` library (real sockets, a thread per connection, every request handed to a
handler), and for the ``http.server`` fakes a TLS wrapper and a server without Nagle's
delay."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class LocalCA:
    """``ca_file``: the CA certificate (point SSL_CERT_FILE at it); ``cert_file`` and
    ``key_file``: the server's certificate (127.0.0.1, localhost) and key."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self, alpn: list[str]) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(alpn)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_local_ca(directory: Path) -> LocalCA:
    """A CA and a server certificate signed by it, written as PEM files in ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("NotifyFlow test CA"))
        .issuer_name(_name("NotifyFlow test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca = LocalCA(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    ca.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    ca.cert_file.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    ca.key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca


@dataclass
class H2Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class H2Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class H2Server:
    """HTTP/2 over TLS on 127.0.0.1, and HTTP/1.1 (kept alive) on connections whose
    client asked for it when ``context`` offers ``http/1.1`` too. Each request, once its
    stream (or body) ends, goes to ``handler``, whose answer is sent back on it.
    ``tls_connections``: TLS handshakes completed (a kept-alive client makes one)."""

    def __init__(
        self,
        handler: Callable[[H2Request], H2Answer],
        context: ssl.SSLContext,
        alpn: tuple[str, ...] = ("h2",),
    ) -> None:
        self.handler = handler
        self.context = context
        self.alpn = alpn
        self.tls_connections = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> H2Server:
        self.thread.start()
        return self

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:  # closed
                return
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        with self._lock:
            self.tls_connections += 1
            self._sockets.append(tls)
        try:
            if tls.selected_alpn_protocol() == "h2":
                self._converse(tls)
            elif "http/1.1" in self.alpn:
                self._converse_http1(tls)
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            tls.close()

    def _converse(self, tls: ssl.SSLSocket) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        while True:
            data = tls.recv(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    streams[event.stream_id] = (dict(event.headers), bytearray())  # type: ignore[arg-type]
                elif isinstance(event, h2.events.DataReceived):
                    streams[event.stream_id][1].extend(event.data)
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    headers, body = streams.pop(event.stream_id)
                    self._answer(conn, event.stream_id, headers, bytes(body))
                elif isinstance(event, h2.events.ConnectionTerminated):
                    tls.sendall(conn.data_to_send())
                    return
            tls.sendall(conn.data_to_send())

    def _converse_http1(self, tls: ssl.SSLSocket) -> None:
        """HTTP/1.1 requests on one kept-alive connection, each handed to ``handler``
        (header names in lower case, as HTTP/2 has them)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                answer = server.handler(H2Request("POST", self.path, headers, body))
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

        Handler(tls, tls.getpeername(), None)  # type: ignore[arg-type]

    def _answer(
        self, conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str], body: bytes
    ) -> None:
        request = H2Request(headers[":method"], headers[":path"], headers, body)
        answer = self.handler(request)
        sent = [(":status", str(answer.status)), ("content-length", str(len(answer.body)))]
        sent += [(name.lower(), value) for name, value in answer.headers.items()]
        conn.send_headers(stream_id, sent, end_stream=not answer.body)
        if answer.body:
            conn.send_data(stream_id, answer.body, end_stream=True)


class NoDelayHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with Nagle's algorithm off on its connections, as real
    servers have it: a client writing a request's headers and body apart would otherwise
    wait for a delayed ACK on each request of a kept-alive connection."""

    daemon_threads = True

    def get_request(self) -> tuple[socket.socket, object]:
        conn, address = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


def wrap_handler_socket(handler, context: ssl.SSLContext) -> None:
    """TLS on an ``http.server`` handler's connection, in its own thread: call from the
    handler's ``setup`` before ``super().setup()``."""
    handler.request = context.wrap_socket(handler.request, server_side=True)
