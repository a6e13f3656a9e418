"""Recipients (SPEC §12): the body of PUT/PATCH /recipients/{id}/, of each bulk item
and of an inline trigger recipient; addresses validated here, at the edge."""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

from rest_framework import serializers

from notifyflow.fields import InputSerializer, JsonObjectField, StrictCharField
from recipients.models import Recipient

MAX_RECIPIENT_ID_LENGTH = Recipient._meta.get_field("id").max_length or 255
E164 = re.compile(r"^\+[1-9][0-9]{1,14}$")
_PHONE_NOISE = re.compile(r"[\s().-]")


def valid_phone(value: str) -> str:
    """``value`` in E.164 (spaces, dots, dashes and parentheses dropped), else a
    validation error ``invalid_phone``."""
    normalized = _PHONE_NOISE.sub("", value)
    if not E164.match(normalized):
        raise serializers.ValidationError(
            f"{value!r} is not a phone number in E.164 form (+15551234567)", code="invalid_phone"
        )
    return normalized


def valid_timezone(value: str) -> str:
    """``value`` if it names an IANA time zone (``zoneinfo``), else ``invalid_timezone``."""
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise serializers.ValidationError(
            f"{value!r} is not an IANA time zone name (e.g. Europe/Paris)",
            code="invalid_timezone",
        ) from None
    return value


class RecipientFieldsSerializer(InputSerializer):
    """A recipient's own fields. Every field is optional; an explicit null clears it.
    ``partial`` decides what a missing field means (kept) - the caller's choice."""

    email = serializers.EmailField(max_length=320, required=False, allow_null=True)
    phone = StrictCharField(max_length=32, required=False, allow_null=True)
    timezone = StrictCharField(max_length=64, required=False, allow_null=True)
    locale = StrictCharField(max_length=35, required=False, allow_null=True)
    properties = JsonObjectField(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # Only the fields the body names (no field defaults): an upsert or a PATCH keeps
        # the others.
        values = dict(super().to_internal_value(data))
        return {name: value for name, value in values.items() if name in data}

    def validate_phone(self, value: str | None) -> str | None:
        return None if value is None else valid_phone(value)

    def validate_timezone(self, value: str | None) -> str | None:
        return None if value is None else valid_timezone(value)


class InlineRecipientSerializer(RecipientFieldsSerializer):
    """A recipient written where it is used (a trigger's ``recipients``, a bulk item):
    its ``id`` and the fields to set."""

    id = StrictCharField(max_length=MAX_RECIPIENT_ID_LENGTH)
