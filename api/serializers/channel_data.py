"""A recipient's channel data: the bodies of ``/recipients/{id}/channel-data/push/``,
``…/chat/`` and ``…/push/devices/``, ``channel_data`` in an inline recipient, and the
answers.

Each body is checked whole by ``recipients.channel_inputs`` (one set of rules for the
API, inline recipients and the console); the schemas below publish those rules - the
same patterns, lengths and forms - so what the schema allows and what is accepted are
the same set. A device is one of three forms (and a connection one of three) told
apart by ``provider``: ``oneOf`` components, described by
``api.openapi.ChannelDataSchemaExtension``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from api.fields import InputSerializer
from notifyflow.errors import ApplicationError
from notifyflow.text import KEY_PATTERN
from recipients.channel_inputs import (
    APNS_TOKEN_PATTERN,
    AUTH_PATTERN,
    FCM_TOKEN_PATTERN,
    MAX_APNS_TOKEN_LENGTH,
    MAX_APP_LENGTH,
    MAX_CONNECTIONS,
    MAX_DEVICES,
    MAX_LOCALE_LENGTH,
    MAX_SLACK_ID_LENGTH,
    MAX_TOKEN_LENGTH,
    MAX_WEBHOOK_URL_LENGTH,
    P256DH_PATTERN,
    ChannelData,
    ConnectionInput,
    DeviceInput,
    check_channel_data,
    check_chat,
    check_connection,
    check_device,
    check_push,
    timezone_names,
)
from recipients.models import ChatConnection, PushDevice

SUBSCRIPTION = "WebPushSubscription"
_URL = {"type": "string", "minLength": 1, "pattern": "^https?://\\S+$"}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _printable(most: int, description: str) -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": most,
        "pattern": KEY_PATTERN,
        "nullable": True,
        "description": description,
    }


def _one(value: str) -> dict[str, Any]:
    # A pattern, not a one-value enum: drf-spectacular's enum hook would give each
    # form's enum the same component name.
    return {"type": "string", "pattern": f"^{value}$"}


def _device(provider: str, token: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "provider": _one(provider),
            "token": token,
            "locale": _printable(MAX_LOCALE_LENGTH, "The device's locale (e.g. fr-CA)"),
            "timezone": {
                "type": "string",
                "enum": [*timezone_names(), None],
                "nullable": True,
                "description": "The device's IANA time zone: quiet hours and send windows "
                "use it for this device",
            },
            "app": _printable(MAX_APP_LENGTH, "The app it was registered for (yours to name)"),
        },
        "required": ["provider", "token"],
        "additionalProperties": False,
    }


def _slack_id(description: str) -> dict[str, Any]:
    return {**_printable(MAX_SLACK_ID_LENGTH, description), "nullable": False}


def _connection(providers: str, target: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"provider": _one(providers), target: schema},
        "required": ["provider", target],
        "additionalProperties": False,
    }


# Components of no serializer's, by name (registered by api.openapi.OneOfFormsExtension).
COMPONENTS: dict[str, dict[str, Any]] = {
    SUBSCRIPTION: {
        "type": "object",
        "description": "A browser's push subscription (PushSubscription.toJSON()); "
        "`expirationTime` is accepted and ignored",
        "properties": {
            "endpoint": {
                **_URL,
                "maxLength": MAX_TOKEN_LENGTH,
                "description": "https (http only to a loopback host); its host must be on "
                "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS",
            },
            "keys": {
                "type": "object",
                "properties": {
                    "p256dh": {"type": "string", "pattern": P256DH_PATTERN},
                    "auth": {"type": "string", "pattern": AUTH_PATTERN},
                },
                "required": ["p256dh", "auth"],
                "additionalProperties": False,
            },
            "expirationTime": {"type": "integer", "nullable": True},
        },
        "required": ["endpoint", "keys"],
        "additionalProperties": False,
    },
}
PUSH_DEVICE_SCHEMA: dict[str, Any] = {
    "description": "A device: an FCM registration token, an APNs device token (hex) or "
    "a browser's Web Push subscription",
    "required": ["provider", "token"],
    "oneOf": [
        _device(
            "fcm",
            {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TOKEN_LENGTH,
                "pattern": FCM_TOKEN_PATTERN,
            },
        ),
        _device(
            "apns",
            {
                "type": "string",
                "minLength": 2,
                "maxLength": MAX_APNS_TOKEN_LENGTH,
                "pattern": APNS_TOKEN_PATTERN,
            },
        ),
        _device("webpush", ref(SUBSCRIPTION)),
    ],
}
CHAT_CONNECTION_SCHEMA: dict[str, Any] = {
    "description": "A Slack channel or user id (posted to with the bot token of the "
    "settings), or an incoming webhook URL (Slack, Microsoft Teams, Discord) whose host "
    "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS allows",
    "required": ["provider"],
    "oneOf": [
        _connection("slack", "channel", _slack_id("A Slack channel id (C…) or name")),
        _connection("slack", "user", _slack_id("A Slack user id (U…): a direct message")),
        _connection(
            "(?:slack|msteams|discord)",
            "webhook_url",
            {**_URL, "maxLength": MAX_WEBHOOK_URL_LENGTH},
        ),
    ],
}


class _Checked(InputSerializer):
    """A body checked whole by ``recipients.channel_inputs`` (an ApplicationError naming
    the field); the declared fields are its schema."""


class OneOfForms(_Checked):
    """A body of one of several forms (``oneOf``), which fields cannot describe: its
    ``schema`` is its component (api.openapi.OneOfFormsExtension)."""

    schema: ClassVar[dict[str, Any]] = {}


class PushDeviceInputSerializer(OneOfForms):
    schema = PUSH_DEVICE_SCHEMA

    def to_internal_value(self, data: Any) -> DeviceInput:
        return check_device(data)


class ChatConnectionInputSerializer(OneOfForms):
    schema = CHAT_CONNECTION_SCHEMA

    def to_internal_value(self, data: Any) -> ConnectionInput:
        return check_connection(data)


class PushChannelDataInputSerializer(_Checked):
    """The push channel's data: every device of the recipient's (one per provider and
    token: the last of duplicates wins)."""

    devices = serializers.ListField(
        child=PushDeviceInputSerializer(), max_length=MAX_DEVICES, help_text="May be empty"
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        return {"devices": check_push(data)}


class ChatChannelDataInputSerializer(_Checked):
    """The chat channel's data: every connection of the recipient's (one per target)."""

    connections = serializers.ListField(
        child=ChatConnectionInputSerializer(), max_length=MAX_CONNECTIONS, help_text="May be empty"
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        return {"connections": check_chat(data)}


class ChannelDataInputSerializer(_Checked):
    """``channel_data`` of an inline recipient: each channel named replaces that
    channel's data (as its PUT), one left out is kept, one set to null is cleared."""

    push = PushChannelDataInputSerializer(required=False, allow_null=True)
    chat = ChatChannelDataInputSerializer(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> ChannelData:
        try:
            return check_channel_data(data, field="")
        except ApplicationError as exc:
            # Named below the enclosing field (recipients[i].channel_data.push...): the
            # whole value ("body" to the check) is the field itself.
            field = exc.field or "body"
            detail = [ErrorDetail(exc.message.removeprefix(f"{field}: "), code=exc.code)]
            raise serializers.ValidationError(
                detail if field == "body" else {field: detail}
            ) from None


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "description": "An FCM or APNs token"},
            ref(SUBSCRIPTION),
        ]
    }
)
class TokenField(serializers.Field):
    def to_representation(self, device: PushDevice) -> Any:
        return device.subscription or device.token


class PushDeviceSerializer(serializers.ModelSerializer):
    token = TokenField(source="*", help_text="For `webpush`: the subscription")

    class Meta:
        model = PushDevice
        fields = [
            "id",
            "provider",
            "token",
            "locale",
            "timezone",
            "app",
            "created_at",
            "updated_at",
        ]


class PushChannelDataSerializer(serializers.Serializer):
    devices = PushDeviceSerializer(many=True)


class ChatConnectionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ChatConnection
        fields = [
            "id",
            "provider",
            "channel",
            "user",
            "webhook_url",
            "created_at",
            "updated_at",
        ]


class ChatChannelDataSerializer(serializers.Serializer):
    connections = ChatConnectionSerializer(many=True)
