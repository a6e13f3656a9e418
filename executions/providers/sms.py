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
from .failover import ProviderSpec, provider_specs, send_with_failover


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
    """Twilio's official client; credentials from TWILIO_ACCOUNT_SID/TWILIO_AUTH_TOKEN,
    or from ``options`` (``account_sid``, ``auth_token``, ``from_number``,
    ``api_base_url``) when it is one of several providers in NOTIFYFLOW_SMS_BACKENDS."""

    def __init__(
        self,
        *,
        account_sid: str | None = None,
        auth_token: str | None = None,
        from_number: str | None = None,
        api_base_url: str | None = None,
    ) -> None:
        from twilio.http.http_client import TwilioHttpClient
        from twilio.rest import Client

        account_sid = account_sid or settings.TWILIO_ACCOUNT_SID
        auth_token = auth_token or settings.TWILIO_AUTH_TOKEN
        self.from_number = from_number or settings.SMS_DEFAULT_FROM
        if not account_sid or not auth_token:
            raise ProviderError(
                "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN must be set", permanent=True
            )
        base = (api_base_url if api_base_url is not None else settings.TWILIO_API_BASE_URL).rstrip(
            "/"
        )

        class _HttpClient(TwilioHttpClient):
            # Lets tests point the real client at a local fake Twilio server.
            def request(self, method, url, *args, **kwargs):
                if base:
                    url = url.replace("https://api.twilio.com", base)
                return super().request(method, url, *args, **kwargs)

        self.client = Client(
            account_sid,
            auth_token,
            http_client=_HttpClient(timeout=settings.TWILIO_TIMEOUT_S),
        )

    def send(self, message: SmsMessage) -> SmsSendResult:
        from requests import RequestException
        from twilio.base.exceptions import TwilioRestException

        extra = {}
        if settings.NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL:
            extra["status_callback"] = settings.NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL
        try:
            sent = self.client.messages.create(
                to=message.to,
                from_=message.from_number or self.from_number,
                body=message.body,
                **extra,
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

_backends: dict[str, BaseSmsBackend] = {}


def sms_providers() -> list[ProviderSpec]:
    """NOTIFYFLOW_SMS_BACKENDS in order, or the single SMS_BACKEND."""
    return provider_specs(settings.NOTIFYFLOW_SMS_BACKENDS, settings.SMS_BACKEND)


def get_sms_backend(provider: ProviderSpec | None = None) -> BaseSmsBackend:
    """A provider's backend (default: the first), built once per process (and again
    if the settings change)."""
    provider = provider or sms_providers()[0]
    backend = _backends.get(provider.name)
    if backend is None:
        cls = BACKENDS.get(provider.backend) or import_string(provider.backend)
        backend = cls(**provider.options) if provider.options else cls()
        _backends[provider.name] = backend
    return backend


def send_sms(message: SmsMessage) -> SmsSendResult:
    """Send through the first SMS provider that accepts (failover on transient errors)."""
    return send_with_failover(
        channel="sms",
        providers=sms_providers(),
        call=lambda provider: get_sms_backend(provider).send(message),
    )


def _reset_backend(**kwargs) -> None:
    if kwargs.get("setting", "").startswith(("SMS_", "TWILIO_", "NOTIFYFLOW_SMS_")):
        _backends.clear()


setting_changed.connect(_reset_backend)
