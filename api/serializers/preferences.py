"""A recipient's preferences and what they decide."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import InputSerializer, QuerySerializer
from recipients.preference_settings import check_preferences
from recipients.preferences import CHANNELS

from .recipients import QueryTextField

CHANNELS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {channel: {"type": "boolean", "nullable": True} for channel in CHANNELS},
    "additionalProperties": False,
    "description": "channel -> true (send) or false (opted out); null removes the setting",
}
ENTRY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {"channels": CHANNELS_SCHEMA},
            "additionalProperties": False,
        },
    ],
    "nullable": True,
}
TIME_SCHEMA = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}


class _Any(serializers.JSONField):
    """A value checked as a whole by ``check_preferences``."""


@extend_schema_field({**CHANNELS_SCHEMA, "nullable": True})
class ChannelsField(_Any):
    pass


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": ENTRY_SCHEMA,
        "nullable": True,
        "description": "name -> true, false or {channels: {...}}; null removes the setting",
    }
)
class EntriesField(_Any):
    pass


@extend_schema_field(
    {
        "type": "object",
        "properties": {"from": TIME_SCHEMA, "until": TIME_SCHEMA},
        "required": ["from", "until"],
        "additionalProperties": False,
        "nullable": True,
        "description": "HH:MM to HH:MM in the recipient's time zone; null: none",
    }
)
class QuietHoursField(_Any):
    pass


class PreferencesSerializer(InputSerializer):
    """A recipient's preferences: the body of PUT (sections left out are emptied) and
    PATCH (each named setting replaced, null removes it), and the answer of GET. The
    most specific explicit setting wins: workflow x channel, workflow, category x
    channel, category, channel, then send."""

    channels = ChannelsField(required=False, allow_null=True)
    categories = EntriesField(required=False, allow_null=True)
    workflows = EntriesField(required=False, allow_null=True)
    quiet_hours = QuietHoursField(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        super().to_internal_value(data)  # unknown fields
        return check_preferences(data)


class EvaluateQuerySerializer(QuerySerializer):
    """The query string of GET /recipients/{id}/preferences/evaluate/."""

    workflow = QueryTextField(max_length=100, help_text="A workflow key")
    channel = serializers.ChoiceField(choices=list(CHANNELS))


class EvaluateOutputSerializer(serializers.Serializer):
    send = serializers.BooleanField()
    rule = serializers.CharField(
        help_text="The setting that decided (e.g. categories.marketing.channels.email), "
        "`default` (nothing set) or `critical` (the workflow ignores preferences)"
    )
