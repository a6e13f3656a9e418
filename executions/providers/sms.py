"""SMS backends, chosen like EMAIL_BACKEND: ``SMS_BACKEND`` is ``console``, ``locmem``,
``file``, ``twilio`` or a dotted path to a subclass of ``BaseSmsBackend``."""

from __future__ import annotations

import json
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.signals import setting_changed
from django.utils import timezone
from django.utils.module_loading import import_string

from .base import ProviderError


@dataclass(frozen=True)
class SmsMessage:
    to: str
    body: str
    from_number: str
    idempotency_key: str


@dataclass(frozen=True)
class SmsSendResult:
    message_id: str


class BaseSmsBackend:
    def send(self, message: SmsMessage) -> SmsSendResult:
        raise NotImplementedError


class ConsoleSmsBackend(BaseSmsBackend):
    def send(self, message: SmsMessage) -> SmsSendResult:
        message_id = f"console-{uuid.uuid4()}"
        sys.stdout.write(
            f"----- SMS {message_id}\nTo: {message.to}\nFrom: {message.from_number}\n"
            f"{message.body}\n-----\n"
        )
        sys.stdout.flush()
        return SmsSendResult(message_id)


outbox: list[SmsMessage] = []
_outbox_lock = threading.Lock()


class LocmemSmsBackend(BaseSmsBackend):
    """Keeps messages in ``executions.providers.sms.outbox`` (tests)."""

    def send(self, message: SmsMessage) -> SmsSendResult:
        with _outbox_lock:
            outbox.append(message)
        return SmsSendResult(f"locmem-{uuid.uuid4()}")


class FileSmsBackend(BaseSmsBackend):
    """One JSON file per message under SMS_FILE_PATH, like Django's filebased email."""

    def __init__(self) -> None:
        self.path = Path(settings.SMS_FILE_PATH)
        self.path.mkdir(parents=True, exist_ok=True)

    def send(self, message: SmsMessage) -> SmsSendResult:
        message_id = f"file-{uuid.uuid4()}"
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S-%f")
        record = {
            "message_id": message_id,
            "to": message.to,
            "from": message.from_number,
            "body": message.body,
            "idempotency_key": message.idempotency_key,
        }
        target = self.path / f"{stamp}-{message_id}.json"
        tmp = target.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(record))
            tmp.rename(target)
        except OSError as exc:
            raise ProviderError(f"cannot write SMS file: {exc}", permanent=False) from exc
        return SmsSendResult(message_id)


class TwilioSmsBackend(BaseSmsBackend):
    """Twilio's official client; credentials from TWILIO_ACCOUNT_SID/TWILIO_AUTH_TOKEN."""

    def __init__(self) -> None:
        from twilio.http.http_client import TwilioHttpClient
        from twilio.rest import Client

        if not settings.TWILIO_ACCOUNT_SID or not settings.TWILIO_AUTH_TOKEN:
            raise ProviderError(
                "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN must be set", permanent=True
            )
        base = settings.TWILIO_API_BASE_URL.rstrip("/")

        class _HttpClient(TwilioHttpClient):
            # Lets tests point the real client at a local fake Twilio server.
            def request(self, method, url, *args, **kwargs):
                if base:
                    url = url.replace("https://api.twilio.com", base)
                return super().request(method, url, *args, **kwargs)

        self.client = Client(
            settings.TWILIO_ACCOUNT_SID,
            settings.TWILIO_AUTH_TOKEN,
            http_client=_HttpClient(timeout=settings.TWILIO_TIMEOUT_S),
        )

    def send(self, message: SmsMessage) -> SmsSendResult:
        from requests import RequestException
        from twilio.base.exceptions import TwilioRestException

        try:
            sent = self.client.messages.create(
                to=message.to,
                from_=message.from_number or settings.SMS_DEFAULT_FROM,
                body=message.body,
            )
        except TwilioRestException as exc:
            transient = exc.status >= 500 or exc.status in (408, 429)
            raise ProviderError(
                f"Twilio {exc.status} (code {exc.code}): {exc.msg}", permanent=not transient
            ) from exc
        except RequestException as exc:
            raise ProviderError(f"Twilio connection error: {exc}", permanent=False) from exc
        return SmsSendResult(sent.sid)


BACKENDS = {
    "console": ConsoleSmsBackend,
    "locmem": LocmemSmsBackend,
    "file": FileSmsBackend,
    "twilio": TwilioSmsBackend,
}

_backend: tuple[str, BaseSmsBackend] | None = None


def get_sms_backend() -> BaseSmsBackend:
    """The configured backend, built once per process (and again if the setting changes)."""
    global _backend
    name = settings.SMS_BACKEND
    if _backend is None or _backend[0] != name:
        cls = BACKENDS.get(name) or import_string(name)
        _backend = (name, cls())
    return _backend[1]


def send_sms(message: SmsMessage) -> SmsSendResult:
    return get_sms_backend().send(message)


def _reset_backend(**kwargs) -> None:
    global _backend
    if kwargs.get("setting", "").startswith(("SMS_", "TWILIO_")):
        _backend = None


setting_changed.connect(_reset_backend)
