"""A local SMTP responder for failover tests: accepts, refuses with 451, or hangs up."""

from __future__ import annotations

import socketserver
import threading


class FakeSmtpServer:
    """``mode``: "accept" (stores each message), "451" (answers the greeting with 451),
    "close" (closes the connection without a word), "550" (rejects every RCPT), "hang"
    (accepts the connection and never says a word, as a SIGSTOPped server does)."""

    def __init__(self, mode: str = "accept") -> None:
        self.mode = mode
        self.messages: list[bytes] = []
        self.connections = 0
        self.closed = threading.Event()
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                fake.connections += 1
                if fake.mode == "close":
                    return
                if fake.mode == "hang":
                    fake.closed.wait()
                    return
                if fake.mode == "451":
                    self.wfile.write(b"451 4.3.2 try again later\r\n")
                    return
                self.wfile.write(b"220 fake ESMTP\r\n")
                in_data, buffer = False, []
                for line in self.rfile:
                    if in_data:
                        if line == b".\r\n":
                            in_data = False
                            fake.messages.append(b"".join(buffer))
                            self.wfile.write(b"250 2.0.0 queued\r\n")
                        else:
                            buffer.append(line)
                        continue
                    command = line.decode().split(" ")[0].split(":")[0].strip().upper()
                    if command in ("EHLO", "HELO"):
                        self.wfile.write(b"250 fake\r\n")
                    elif command == "RCPT" and fake.mode == "550":
                        self.wfile.write(b"550 5.1.1 no such user\r\n")
                    elif command == "DATA":
                        in_data, buffer = True, []
                        self.wfile.write(b"354 go ahead\r\n")
                    elif command == "QUIT":
                        self.wfile.write(b"221 bye\r\n")
                        return
                    else:
                        self.wfile.write(b"250 ok\r\n")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def provider(self, name: str) -> dict:
        """This server as an entry of NOTIFYFLOW_EMAIL_BACKENDS."""
        return {
            "name": name,
            "backend": "django.core.mail.backends.smtp.EmailBackend",
            "options": {"host": "127.0.0.1", "port": self.port, "timeout": 5},
        }

    def close(self) -> None:
        self.closed.set()
        self.server.shutdown()
        self.server.server_close()
