"""What a recipient's channel data may be: the bodies of ``PUT
/recipients/{id}/channel-data/push/`` and ``…/chat/``, one device of ``POST
…/push/devices/``, and ``channel_data`` in an inline recipient - read into typed inputs
for ``recipients.channel_data``, or an ApplicationError naming the first wrong field with
a stable code. The API's serializers call these (their schema states the same rules);
the URLs the workers will call are checked here against their allow-lists, and the same
checks are the senders' at send (``webpush_endpoint_problem``,
``chat_webhook_problem``).

- push: ``{devices: [{provider: fcm|apns|webpush, token, locale?, timezone?, app?}]}``,
  at most MAX_DEVICES. An FCM token is visible ASCII; an APNs token is hex (stored
  lower-case); a Web Push token is the browser's subscription ``{endpoint, keys:
  {p256dh, auth}, expirationTime?}`` (``expirationTime`` is ignored): the endpoint an
  https URL on NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS, the keys base64url of a P-256 public
  key (65 bytes, uncompressed) and of a 16-byte secret.
- chat: ``{connections: [{provider: slack, channel} | {provider: slack, user} |
  {provider: slack|msteams|discord, webhook_url}]}``, at most MAX_CONNECTIONS; a
  webhook URL on NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS.

Devices with the same provider and token (connections with the same target) in one
body are one: the last one wins.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings

from notifyflow.errors import ApplicationError
from notifyflow.text import printable_problem
from workflows.definition.webhooks import url_problem

from .models import ChatConnection, ChatProvider, PushDevice, PushProvider

MAX_DEVICES = 20
MAX_CONNECTIONS = 20
MAX_TOKEN_LENGTH = PushDevice._meta.get_field("token").max_length or 1024
# An APNs device token: 32 bytes today; Apple says the length may change.
MAX_APNS_TOKEN_LENGTH = 200
MAX_LOCALE_LENGTH = PushDevice._meta.get_field("locale").max_length or 35
MAX_APP_LENGTH = PushDevice._meta.get_field("app").max_length or 200
MAX_SLACK_ID_LENGTH = ChatConnection._meta.get_field("channel").max_length or 100
MAX_WEBHOOK_URL_LENGTH = ChatConnection._meta.get_field("webhook_url").max_length or 1024
# Each pattern is published as is by the schema (api.serializers.channel_data): what the
# schema allows and what is accepted are the same set.
FCM_TOKEN_PATTERN = "^[!-~]+$"
APNS_TOKEN_PATTERN = "^(?:[0-9A-Fa-f]{2})+$"
# base64url (padding optional) of 65 bytes starting 0x04 (an uncompressed P-256 point:
# "B", then a character whose top two bits are 0), and of 16 bytes.
P256DH_PATTERN = "^B[A-P][A-Za-z0-9_-]{85}=?$"
AUTH_PATTERN = "^[A-Za-z0-9_-]{22}(?:==)?$"
_FCM_TOKEN = re.compile(FCM_TOKEN_PATTERN)
_APNS_TOKEN = re.compile(APNS_TOKEN_PATTERN)
_P256DH = re.compile(P256DH_PATTERN)
_AUTH = re.compile(AUTH_PATTERN)
DEVICE_FIELDS = ("provider", "token", "locale", "timezone", "app")
SUBSCRIPTION_FIELDS = ("endpoint", "keys", "expirationTime")


@dataclass(frozen=True)
class DeviceInput:
    """A device to save: ``token`` is the Web Push endpoint for ``webpush`` (its
    ``keys`` ``{p256dh, auth}``; None for the others)."""

    provider: str
    token: str
    keys: dict[str, str] | None = None
    locale: str | None = None
    timezone: str | None = None
    app: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What identifies it among a recipient's devices."""
        return self.provider, self.token


@dataclass(frozen=True)
class ConnectionInput:
    """A chat connection to save: exactly one of ``channel``, ``user`` (Slack) and
    ``webhook_url``."""

    provider: str
    channel: str | None = None
    user: str | None = None
    webhook_url: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What identifies it among a recipient's connections (the unique constraints)."""
        if self.webhook_url is not None:
            return "webhook_url", self.webhook_url
        if self.channel is not None:
            return "channel", self.channel
        return "user", self.user or ""


@dataclass(frozen=True)
class ChannelData:
    """An inline recipient's ``channel_data``: each channel named replaces that
    channel's data; None: left out, kept."""

    push: list[DeviceInput] | None = None
    chat: list[ConnectionInput] | None = None


def _error(code: str, field: str, problem: str) -> ApplicationError:
    return ApplicationError(code=code, field=field, message=f"{field}: {problem}")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _object(value: Any, field: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _error("not_an_object", field or "body", "must be a JSON object")
    for name in value:
        if name not in allowed:
            raise _error(
                "unknown_field",
                _join(field, str(name)),
                f"unknown field; expected one of: {', '.join(sorted(allowed))}",
            )
    return value


def _list(value: Any, field: str, most: int, noun: str) -> list[Any]:
    if not isinstance(value, list):
        raise _error("not_a_list", field, f"must be a list of {noun}")
    if len(value) > most:
        raise _error(f"too_many_{noun}", field, f"at most {most} {noun}, got {len(value)}")
    return value


def _text(value: Any, field: str, most: int, *, required: bool = False) -> str | None:
    """A printable, non-blank string of at most ``most`` characters; None if left out
    or null (unless ``required``)."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _error("required" if required else "invalid", field, "must be a non-empty string")
    if len(value) > most:
        raise _error("too_long", field, f"at most {most} characters")
    problem = printable_problem(value)
    if problem is not None:
        raise _error(problem[0], field, problem[1])
    return value


def _choice(value: Any, field: str, choices: list[str]) -> str:
    if value is None:
        raise _error("required", field, f"required: one of {', '.join(choices)}")
    if not isinstance(value, str) or value not in choices:
        raise _error("invalid_choice", field, f"must be one of {', '.join(choices)}")
    return value


@cache
def timezone_names() -> list[str]:
    """Every IANA time zone name ``zoneinfo`` knows, sorted (the schema's enum)."""
    return sorted(zoneinfo.available_timezones())


@cache
def _timezones() -> frozenset[str]:
    return frozenset(timezone_names())


def _timezone(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in _timezones():
        raise _error(
            "invalid_timezone", field, f"{value!r} is not an IANA time zone name (Europe/Paris)"
        )
    return value


def webpush_endpoint_problem(endpoint: str) -> tuple[str, str] | None:
    """(code, problem) if the workers may not POST to this Web Push endpoint, else None:
    an https URL (http only to a loopback host) whose host and port
    NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS allows. Checked when a device is saved; the sender
    checks again at send (the setting may have changed since)."""
    return url_problem(
        endpoint,
        allowed_hosts=settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS,
        setting="NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS",
        https_unless_loopback=True,
    )


def chat_webhook_problem(url: str) -> tuple[str, str] | None:
    """(code, problem) if the workers may not POST to this chat webhook URL, else None:
    an http(s) URL whose host and port NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS allows, as for
    the webhook node. Checked when a connection is saved and by the sender at send."""
    return url_problem(url)


def _subscription(value: Any, field: str) -> tuple[str, dict[str, str]]:
    """A Web Push subscription's (endpoint, keys)."""
    subscription = _object(value, field, SUBSCRIPTION_FIELDS)
    endpoint = _text(
        subscription.get("endpoint"), f"{field}.endpoint", MAX_TOKEN_LENGTH, required=True
    )
    assert endpoint is not None
    problem = webpush_endpoint_problem(endpoint)
    if problem is not None:
        raise _error(problem[0], f"{field}.endpoint", problem[1])
    expiration = subscription.get("expirationTime")
    if expiration is not None and (isinstance(expiration, bool) or not isinstance(expiration, int)):
        raise _error("invalid", f"{field}.expirationTime", "must be an integer or null")
    keys = _object(subscription.get("keys"), f"{field}.keys", ("p256dh", "auth"))
    checked = {}
    for name, pattern, what in (
        ("p256dh", _P256DH, "base64url of a P-256 public key (65 bytes, uncompressed)"),
        ("auth", _AUTH, "base64url of 16 bytes"),
    ):
        key = keys.get(name)
        if not isinstance(key, str):
            raise _error("required", f"{field}.keys.{name}", f"required: {what}")
        if not pattern.fullmatch(key):
            raise _error("invalid_key", f"{field}.keys.{name}", f"must be {what}")
        checked[name] = key
    return endpoint, checked


def _token(provider: str, value: Any, field: str) -> tuple[str, dict[str, str] | None]:
    if provider == PushProvider.WEBPUSH:
        return _subscription(value, field)
    if not isinstance(value, str):
        raise _error("required", field, "must be a non-empty string")
    if provider == PushProvider.APNS:
        if len(value) > MAX_APNS_TOKEN_LENGTH:
            raise _error("too_long", field, f"at most {MAX_APNS_TOKEN_LENGTH} characters")
        if not _APNS_TOKEN.fullmatch(value):
            raise _error("invalid_token", field, "an APNs device token is hexadecimal")
        return value.lower(), None
    if len(value) > MAX_TOKEN_LENGTH:
        raise _error("too_long", field, f"at most {MAX_TOKEN_LENGTH} characters")
    if not _FCM_TOKEN.fullmatch(value):
        problem = printable_problem(value)
        code, text = problem or ("invalid_token", "an FCM token is visible ASCII, no spaces")
        raise _error(code, field, text)
    return value, None


def check_device(value: Any, field: str = "") -> DeviceInput:
    """One device ``{provider, token, locale?, timezone?, app?}`` (``field``: where it
    is in the body)."""
    device = _object(value, field, DEVICE_FIELDS)
    provider = _choice(device.get("provider"), _join(field, "provider"), PushProvider.values)
    token, keys = _token(provider, device.get("token"), _join(field, "token"))
    return DeviceInput(
        provider=provider,
        token=token,
        keys=keys,
        locale=_text(device.get("locale"), _join(field, "locale"), MAX_LOCALE_LENGTH),
        timezone=_timezone(device.get("timezone"), _join(field, "timezone")),
        app=_text(device.get("app"), _join(field, "app"), MAX_APP_LENGTH),
    )


def check_push(value: Any, field: str = "") -> list[DeviceInput]:
    """The push channel's data ``{devices: [...]}``: its devices, one per provider and
    token (the last of duplicates wins), in the order first given."""
    body = _object(value, field, ("devices",))
    if "devices" not in body:
        raise _error("required", _join(field, "devices"), "required (a list, may be empty)")
    name = _join(field, "devices")
    devices = _list(body["devices"], name, MAX_DEVICES, "devices")
    checked = [check_device(device, f"{name}[{index}]") for index, device in enumerate(devices)]
    return list({device.key: device for device in checked}.values())


def check_connection(value: Any, field: str = "") -> ConnectionInput:
    """One connection: ``{provider: slack, channel}``, ``{provider: slack, user}`` or
    ``{provider, webhook_url}``."""
    connection = _object(value, field, ("provider", "channel", "user", "webhook_url"))
    provider = _choice(connection.get("provider"), _join(field, "provider"), ChatProvider.values)
    forms = [name for name in ("channel", "user", "webhook_url") if name in connection]
    if len(forms) != 1:
        raise _error(
            "one_target",
            field or "body",
            "give exactly one of channel, user (Slack, with the bot token) or webhook_url",
        )
    (form,) = forms
    where = _join(field, form)
    if form != "webhook_url":
        if provider != ChatProvider.SLACK:
            raise _error(
                "webhook_required", where, f"{provider} is reached by an incoming webhook_url"
            )
        target = _text(connection[form], where, MAX_SLACK_ID_LENGTH, required=True)
        return ConnectionInput(provider=provider, **{form: target})
    url = _text(connection[form], where, MAX_WEBHOOK_URL_LENGTH, required=True)
    assert url is not None
    problem = chat_webhook_problem(url)
    if problem is not None:
        raise _error(problem[0], where, problem[1])
    return ConnectionInput(provider=provider, webhook_url=url)


def check_chat(value: Any, field: str = "") -> list[ConnectionInput]:
    """The chat channel's data ``{connections: [...]}``: one per target (the last of
    duplicates wins), in the order first given."""
    body = _object(value, field, ("connections",))
    if "connections" not in body:
        raise _error("required", _join(field, "connections"), "required (a list, may be empty)")
    name = _join(field, "connections")
    connections = _list(body["connections"], name, MAX_CONNECTIONS, "connections")
    checked = [check_connection(item, f"{name}[{index}]") for index, item in enumerate(connections)]
    return list({connection.key: connection for connection in checked}.values())


def check_channel_data(value: Any, field: str = "channel_data") -> ChannelData:
    """An inline recipient's ``{push?: {devices}, chat?: {connections}}``: a channel left
    out is kept, one set to null is cleared (as an empty list would)."""
    data = _object(value, field, ("push", "chat"))
    push: list[DeviceInput] | None = None
    chat: list[ConnectionInput] | None = None
    if "push" in data:
        push = [] if data["push"] is None else check_push(data["push"], _join(field, "push"))
    if "chat" in data:
        chat = [] if data["chat"] is None else check_chat(data["chat"], _join(field, "chat"))
    return ChannelData(push=push, chat=chat)
