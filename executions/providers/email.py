"""Email through Django's email API, whatever EMAIL_BACKEND is (anymail, SMTP, file...)."""

from __future__ import annotations

import smtplib
from dataclasses import dataclass
from email.policy import Compat32

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.signals import setting_changed

from .base import ProviderError
from .failover import ProviderSpec, provider_specs, send_with_failover


@dataclass(frozen=True)
class EmailSendResult:
    message_id: str


_connections: dict[str, object] = {}


class HeadersAsWritten(Compat32):
    """The email package's ``compat32`` policy (what Django's messages use), but a
    header that needs no folding or encoding - printable ASCII within the line length -
    is written as it is, without the ``Header`` object folding builds. The bytes are
    ``compat32``'s (tests/executions/providers/test_email.py compares them); the saving
    is most of a message's serialisation (bench/RESULTS.md, "Issue 44, fifth round")."""

    def fold_binary(self, name: str, value: str) -> bytes:
        if (
            type(value) is str
            and len(name) + len(value) + 2 <= (self.max_line_length or 0)
            and value.isascii()
            and value.isprintable()
        ):
            return f"{name}: {value}{self.linesep}".encode("ascii")
        return super().fold_binary(name, value)


HEADERS_AS_WRITTEN = HeadersAsWritten()


class _Email(EmailMultiAlternatives):
    """Django's message, serialised with ``HeadersAsWritten`` (by SMTP, the file
    backend, or an ESP that sends the raw message)."""

    def message(self, *args, **kwargs):
        msg = super().message(*args, **kwargs)
        msg.policy = HEADERS_AS_WRITTEN
        return msg


def _get_connection(provider: ProviderSpec):
    # One backend object per provider and process (built once, not per message).
    connection = _connections.get(provider.name)
    if connection is None:
        connection = get_connection(provider.backend, **provider.options)
        _connections[provider.name] = connection
    return connection


def email_providers() -> list[ProviderSpec]:
    """NOTIFYFLOW_EMAIL_BACKENDS in order, or the single EMAIL_BACKEND."""
    return provider_specs(settings.NOTIFYFLOW_EMAIL_BACKENDS, settings.EMAIL_BACKEND)


def _reset_connection(**kwargs) -> None:
    if kwargs.get("setting", "").startswith(("EMAIL_", "ANYMAIL", "NOTIFYFLOW_EMAIL_")):
        _connections.clear()


setting_changed.connect(_reset_connection)


def send_email(
    *,
    to: list[str],
    subject: str,
    body: str,
    html_body: str | None,
    from_email: str | None,
    reply_to: list[str] | None,
    message_id: str,
    idempotency_key: str,
    headers: dict[str, str] | None = None,
) -> EmailSendResult:
    """Send one message through the first email provider that accepts it (failover:
    a transient error tries the next one); raise ProviderError:
    SMTP 4xx replies and connection errors are transient, 5xx rejections permanent.

    ``message_id`` is set as the Message-ID header: stable per (instance, node), so a
    re-send after an unknown outcome carries the same id and receivers can dedupe it.
    ``headers`` are added to the message (List-Unsubscribe, ...).
    """
    message = _Email(
        subject=subject,
        body=body,
        from_email=from_email or settings.DEFAULT_FROM_EMAIL,
        to=to,
        reply_to=reply_to or None,
        headers={
            **(headers or {}),
            "Message-ID": message_id,
            "X-NotifyFlow-Idempotency-Key": idempotency_key,
        },
    )
    if html_body:
        message.attach_alternative(html_body, "text/html")

    def call(provider: ProviderSpec) -> EmailSendResult:
        message.connection = _get_connection(provider)
        return _send_one(message, message_id)

    return send_with_failover(channel="email", providers=email_providers(), call=call)


def _send_one(message: EmailMultiAlternatives, message_id: str) -> EmailSendResult:
    try:
        sent = message.send(fail_silently=False)
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        transient = bool(codes) and all(400 <= c < 500 for c in codes)
        raise ProviderError(
            f"SMTP refused recipients: {exc.recipients}", permanent=not transient
        ) from exc
    except smtplib.SMTPResponseException as exc:
        raise ProviderError(
            f"SMTP {exc.smtp_code}: {exc.smtp_error!r}", permanent=exc.smtp_code >= 500
        ) from exc
    except (
        TimeoutError,
        smtplib.SMTPServerDisconnected,
        smtplib.SMTPConnectError,
        ConnectionError,
        OSError,
    ) as exc:
        raise ProviderError(f"email connection error: {exc}", permanent=False) from exc
    except Exception as exc:
        _raise_anymail(exc)
        raise
    if not sent:
        raise ProviderError("the email backend reported 0 messages sent", permanent=False)
    status = getattr(message, "anymail_status", None)
    esp_id = getattr(status, "message_id", None) if status is not None else None
    if isinstance(esp_id, set):  # several recipients with different ids
        esp_id = ",".join(sorted(str(i) for i in esp_id))
    return EmailSendResult(message_id=str(esp_id) if esp_id not in (None, "") else message_id)


def _raise_anymail(exc: Exception) -> None:
    try:
        from anymail.exceptions import (
            AnymailAPIError,
            AnymailInvalidAddress,
            AnymailRecipientsRefused,
        )
    except ImportError:  # pragma: no cover - anymail is a dependency
        return
    if isinstance(exc, (AnymailRecipientsRefused, AnymailInvalidAddress)):
        raise ProviderError(f"recipient rejected: {exc}", permanent=True) from exc
    if isinstance(exc, AnymailAPIError):
        code = getattr(exc, "status_code", None)
        permanent = code is not None and 400 <= code < 500 and code not in (408, 429)
        raise ProviderError(f"email provider error: {exc}", permanent=permanent) from exc
