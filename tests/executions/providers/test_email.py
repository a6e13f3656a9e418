"""Email through Django's SMTP backend against a local fake SMTP server: 4xx replies and
connection errors are transient, 5xx rejections permanent; anymail's message id wins."""

from __future__ import annotations

import email.errors
import email.policy
import socketserver
import string
import threading

import pytest
from django.conf import settings as django_settings
from django.core.mail import EmailMultiAlternatives
from hypothesis import given, settings
from hypothesis import strategies as st

from executions.providers.base import ProviderError
from executions.providers.email import HEADERS_AS_WRITTEN, send_email

pytestmark = pytest.mark.both_databases


class FakeSmtp:
    """Replies 250 to everything except the command named in ``fail_on``."""

    def __init__(self, fail_on: str | None = None, reply: str = "") -> None:
        self.messages: list[bytes] = []
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                self.wfile.write(b"220 fake ESMTP\r\n")
                in_data = False
                buffer: list[bytes] = []
                for line in self.rfile:
                    if in_data:
                        if line == b".\r\n":
                            in_data = False
                            if fail_on == "DATA_END":
                                self.wfile.write(reply.encode() + b"\r\n")
                                continue
                            fake.messages.append(b"".join(buffer))
                            self.wfile.write(b"250 2.0.0 queued as 123\r\n")
                        else:
                            buffer.append(line)
                        continue
                    command = line.decode().split(" ")[0].split(":")[0].strip().upper()
                    if fail_on and command == fail_on:
                        self.wfile.write(reply.encode() + b"\r\n")
                    elif command in ("EHLO", "HELO"):
                        self.wfile.write(b"250 fake\r\n")
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

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(**overrides):
    kwargs = dict(
        to=["a@example.com"],
        subject="s",
        body="b",
        html_body="<p>b</p>",
        from_email=None,
        reply_to=None,
        message_id="<x.y@notifyflow>",
        idempotency_key="x:y",
    )
    kwargs.update(overrides)
    return send_email(**kwargs)


@pytest.fixture
def smtp_settings(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_TIMEOUT = 5
    return settings


def run_with(smtp_settings, fail_on, reply):
    fake = FakeSmtp(fail_on, reply)
    smtp_settings.EMAIL_PORT = fake.port
    try:
        return fake, send()
    finally:
        fake.close()


def test_smtp_success_uses_our_message_id(smtp_settings):
    fake, result = run_with(smtp_settings, None, "")
    assert result.message_id == "<x.y@notifyflow>"
    assert b"Message-ID: <x.y@notifyflow>" in fake.messages[0]


@pytest.mark.parametrize(
    "fail_on,reply,permanent",
    [
        ("RCPT", "450 4.2.1 mailbox busy", False),
        ("RCPT", "550 5.1.1 no such user", True),
        ("MAIL", "451 4.3.0 try again", False),
        ("MAIL", "553 5.1.8 sender rejected", True),
        ("DATA_END", "452 4.3.1 out of storage", False),
        ("DATA_END", "554 5.7.1 spam", True),
    ],
)
def test_smtp_reply_codes_are_classified(smtp_settings, fail_on, reply, permanent):
    with pytest.raises(ProviderError) as info:
        run_with(smtp_settings, fail_on, reply)
    assert info.value.permanent is permanent


def test_connection_refused_is_transient(smtp_settings):
    smtp_settings.EMAIL_PORT = 1
    with pytest.raises(ProviderError) as info:
        send()
    assert info.value.permanent is False


def test_anymail_message_id_is_kept(settings):
    settings.EMAIL_BACKEND = "anymail.backends.test.EmailBackend"
    from django.core import mail

    mail.outbox = []
    # anymail's test backend uses the outbox index as the ESP message id.
    assert [send().message_id, send().message_id] == ["0", "1"]


# --- serialisation: headers written as they are, the bytes compat32 would write ---------

_header_names = st.text(alphabet=string.ascii_letters + "-", min_size=1, max_size=30).filter(
    lambda name: name[0] != "-"
)
_header_values = st.one_of(
    st.text(alphabet=string.printable + "\u00e9\u2019", max_size=120),
    # What headers hold: words, addresses, ids; lengths around the 78-character line.
    st.text(alphabet=string.ascii_letters + string.digits + " \t<>@.,;:=/-", max_size=100),
    st.integers(min_value=60, max_value=80).map(lambda n: "x" * n),
)


@given(name=_header_names, value=_header_values, linesep=st.sampled_from(["\n", "\r\n"]))
@settings(max_examples=2000, deadline=None)
def test_a_header_is_serialised_as_compat32_serialises_it(name, value, linesep):
    stock = email.policy.compat32.clone(linesep=linesep)
    ours = HEADERS_AS_WRITTEN.clone(linesep=linesep)
    try:
        expected = stock.fold_binary(name, value)
    except email.errors.HeaderParseError:
        with pytest.raises(email.errors.HeaderParseError):
            ours.fold_binary(name, value)
        return
    assert ours.fold_binary(name, value) == expected


@pytest.mark.parametrize(
    "subject",
    [
        "Hello Ada",
        "Caf\u00e9 \u2019 and a long subject " + "that goes on " * 8,
        "Trailing space ",
        "Double  space",
    ],
)
def test_a_sent_message_has_the_bytes_django_would_send(smtp_settings, subject):
    fake = FakeSmtp()
    smtp_settings.EMAIL_PORT = fake.port
    headers = {"List-Unsubscribe": "<https://example.com/u/" + "x" * 90 + ">"}
    try:
        send(subject=subject, headers=headers)
    finally:
        fake.close()
    stock = EmailMultiAlternatives(
        subject=subject,
        body="b",
        from_email=django_settings.DEFAULT_FROM_EMAIL,
        to=["a@example.com"],
        headers={
            **headers,
            "Message-ID": "<x.y@notifyflow>",
            "X-NotifyFlow-Idempotency-Key": "x:y",
        },
    )
    stock.attach_alternative("<p>b</p>", "text/html")
    expected = stock.message().as_bytes(linesep="\r\n")

    def without_varying(raw: bytes) -> list[bytes]:  # the Date and the MIME boundary
        boundary = raw.split(b'boundary="', 1)[1].split(b'"', 1)[0]
        lines = raw.replace(boundary, b"B").rstrip(b"\r\n").split(b"\r\n")
        return [line for line in lines if not line.startswith(b"Date:")]

    assert without_varying(fake.messages[0]) == without_varying(expected)
