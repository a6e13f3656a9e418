"""Recipients: the body of PUT/PATCH /recipients/{id}/, of each bulk item
and of an inline trigger recipient; addresses validated here, at the edge.

Each check is one regular expression (or a list) that the OpenAPI schema publishes as
is, so what the schema allows and what the API accepts are the same set."""

from __future__ import annotations

import re
import zoneinfo
from functools import cache
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from api.errors import error_body, validation_error
from api.fields import (
    InputSerializer,
    JsonObjectField,
    KeyField,
    QuerySerializer,
    StrictCharField,
)
from notifyflow.errors import ApplicationError
from notifyflow.text import check_storable, key_pattern
from recipients.ids import MAX_RECIPIENT_ID_LENGTH, RESERVED_RECIPIENT_IDS, recipient_id_problem
from recipients.lists import MAX_MEMBERS_PER_REQUEST
from recipients.models import Recipient
from recipients.services import RecipientBulkOutcome

from .channel_data import ChannelDataInputSerializer
from .items import ItemErrorSerializer

MAX_BULK_RECIPIENTS = 1000
# Spaces, dots, dashes and parentheses are dropped before the E.164 check (ASCII only:
# the same characters in Python and in the schema's ECMAScript pattern).
_NOISE = "[ \\t\\n\\r\\f\\v().-]"
_PHONE_NOISE = re.compile(_NOISE)
E164 = re.compile(r"\+[1-9][0-9]{1,14}")
PHONE_PATTERN = f"^{_NOISE}*\\+{_NOISE}*[1-9]({_NOISE}*[0-9]){{1,14}}{_NOISE}*$"
# The HTML standard's valid e-mail address, with a dot in the domain.
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_PATTERN = f"^[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]+@{_LABEL}(?:\\.{_LABEL})+$"
_EMAIL = re.compile(EMAIL_PATTERN[1:-1])
# A recipient id (in a path or a body): printable text, not blank, no "/", not a
# reserved segment (recipients.ids), at most 255 characters.
_RESERVED = "|".join(re.escape(reserved) for reserved in sorted(RESERVED_RECIPIENT_IDS))
ID_PATTERN = f"^(?!(?:{_RESERVED})$)" + key_pattern("/")[1:]
ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_RECIPIENT_ID_LENGTH,
    "pattern": ID_PATTERN,
}


@cache
def timezones() -> list[str]:
    """Every IANA time zone name ``zoneinfo`` knows, sorted (the schema's enum)."""
    return sorted(zoneinfo.available_timezones())


@cache
def _timezone_set() -> frozenset[str]:
    return frozenset(timezones())


def valid_phone(value: str) -> str:
    """``value`` in E.164 (spaces, dots, dashes and parentheses dropped), else a
    validation error ``invalid_phone``."""
    normalized = _PHONE_NOISE.sub("", value)
    if not E164.fullmatch(normalized):
        raise serializers.ValidationError(
            f"{value!r} is not a phone number in E.164 form (+15551234567)", code="invalid_phone"
        )
    return normalized


def valid_timezone(value: str) -> str:
    """``value`` if it names an IANA time zone (``zoneinfo``), else ``invalid_timezone``."""
    if value not in _timezone_set():
        raise serializers.ValidationError(
            f"{value!r} is not an IANA time zone name (e.g. Europe/Paris)",
            code="invalid_timezone",
        )
    return value


def valid_email(value: str) -> str:
    """``value`` if it is an e-mail address, else ``invalid_email``."""
    if not _EMAIL.fullmatch(value):
        raise serializers.ValidationError(
            f"{value!r} is not an e-mail address", code="invalid_email"
        )
    return value


def valid_recipient_id(value: Any, field: str = "id") -> str:
    """A recipient id from a path: printable, not blank, not reserved, at most 255
    characters (``recipient_id_problem``); else a 400 naming ``field``."""
    problem = recipient_id_problem(value) if isinstance(value, str) else None
    if problem is not None:
        raise ApplicationError(code=problem[0], field=field, message=f"{field}: {problem[1]}")
    if not isinstance(value, str) or not value.strip():
        raise ApplicationError(code="invalid", field=field, message=f"{field}: must not be blank")
    if len(value) > MAX_RECIPIENT_ID_LENGTH:
        raise ApplicationError(
            code="too_long",
            field=field,
            message=f"{field}: at most {MAX_RECIPIENT_ID_LENGTH} characters",
        )
    return value


@extend_schema_field(
    {"type": "string", "maxLength": 320, "pattern": EMAIL_PATTERN, "nullable": True}
)
class EmailAddressField(StrictCharField):
    pass


@extend_schema_field(
    {"type": "string", "maxLength": 32, "pattern": PHONE_PATTERN, "nullable": True}
)
class PhoneField(StrictCharField):
    pass


@extend_schema_field({"type": "string", "enum": [*timezones(), None], "nullable": True})
class TimezoneField(StrictCharField):
    pass


@extend_schema_field(ID_SCHEMA)
class RecipientIdField(KeyField):
    """A recipient id in a body: as ``valid_recipient_id`` takes one from a path."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=MAX_RECIPIENT_ID_LENGTH, **kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        value = super().run_validation(data)
        problem = recipient_id_problem(value) if isinstance(value, str) else None
        if problem is not None:
            raise serializers.ValidationError(problem[1], code=problem[0])
        return value


class PropertiesField(JsonObjectField):
    """``properties``: a JSON object, or null (stored as {})."""

    def run_validation(self, data: Any = empty) -> Any:
        return None if data is None else super().run_validation(data)


class RecipientFieldsSerializer(InputSerializer):
    """A recipient's own fields. Every field is optional; an explicit null clears it.
    ``partial`` decides what a missing field means (kept) - the caller's choice."""

    email = EmailAddressField(max_length=320, required=False, allow_null=True)
    phone = PhoneField(
        max_length=32,
        required=False,
        allow_null=True,
        help_text="E.164 (+15551234567); spaces, dots, dashes and parentheses are dropped",
    )
    timezone = TimezoneField(
        max_length=64, required=False, allow_null=True, help_text="An IANA time zone name"
    )
    locale = StrictCharField(max_length=35, required=False, allow_null=True)
    properties = PropertiesField(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # Only the fields the body names (no field defaults): an upsert or a PATCH keeps
        # the others.
        values = dict(super().to_internal_value(data))
        return {name: value for name, value in values.items() if name in data}

    def validate_email(self, value: str | None) -> str | None:
        return None if value is None else valid_email(value)

    def validate_phone(self, value: str | None) -> str | None:
        return None if value is None else valid_phone(value)

    def validate_timezone(self, value: str | None) -> str | None:
        return None if value is None else valid_timezone(value)


class InlineRecipientSerializer(RecipientFieldsSerializer):
    """A recipient written where it is used (a trigger's ``recipients``, a bulk item):
    its ``id``, the fields to set and its ``channel_data`` (push devices, chat
    connections: each channel named replaces that channel's data)."""

    id = RecipientIdField()
    channel_data = ChannelDataInputSerializer(required=False)


class RecipientOutputSerializer(serializers.ModelSerializer):
    # As written (EMAIL_PATTERN), not the schema's stricter "email" format.
    email = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Recipient
        fields = [
            "id",
            "email",
            "phone",
            "timezone",
            "locale",
            "properties",
            "created_at",
            "updated_at",
        ]


class QueryTextField(StrictCharField):
    """A query string value: also no NUL character (the databases refuse it)."""

    def run_validation(self, data: Any = empty) -> Any:
        if isinstance(data, str) and "\x00" in data:
            raise serializers.ValidationError("contains a NUL character", code="nul_character")
        return super().run_validation(data)


class RecipientSearchSerializer(QuerySerializer):
    """The query string of GET /recipients/."""

    search = QueryTextField(
        max_length=320,
        required=False,
        help_text="A recipient id, e-mail address or phone number, or the start of one "
        "(e-mail case-insensitive)",
    )


# Described by api.openapi.RecipientItemsFieldExtension (it registers InlineRecipient).
class RecipientItemsField(serializers.ListField):
    """The ``items`` of POST /recipients/bulk/: at most MAX_BULK_RECIPIENTS recipients,
    each checked on its own (a bad one is that item's ApplicationError)."""

    default_error_messages = {
        "not_a_list": "must be a list of recipient objects",
        "too_many_items": "at most {max_length} items per request, got {count}",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=InlineRecipientSerializer(), max_length=MAX_BULK_RECIPIENTS, **kwargs
        )

    def to_internal_value(self, data: Any) -> list[dict[str, Any] | ApplicationError]:
        if not isinstance(data, list):
            self.fail("not_a_list")
        if len(data) > MAX_BULK_RECIPIENTS:
            self.fail("too_many_items", max_length=MAX_BULK_RECIPIENTS, count=len(data))
        return [self._item(raw) for raw in data]

    def _item(self, raw: Any) -> dict[str, Any] | ApplicationError:
        if not isinstance(raw, dict):
            return ApplicationError(
                code="not_an_object", field="body", message="body: must be a JSON object"
            )
        try:
            check_storable(raw)
            return dict(self.child.run_validation(raw))
        except ApplicationError as exc:
            return exc
        except serializers.ValidationError as exc:
            return validation_error(exc)


class RecipientBulkInputSerializer(InputSerializer):
    """The body of POST /api/v1/recipients/bulk/."""

    items = RecipientItemsField(
        help_text=f"At most {MAX_BULK_RECIPIENTS} recipients, each `{{id, email?, phone?, "
        "timezone?, locale?, properties?, channel_data?}`: created, or the fields it names set "
        "(the others kept); an item that is not a valid recipient is answered `invalid` and "
        "writes nothing"
    )


class RecipientBulkResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the item in `items`")
    status = serializers.ChoiceField(choices=["created", "updated", "invalid"])
    id = serializers.CharField(required=False, help_text="The recipient (created or updated)")
    error = ItemErrorSerializer(required=False, help_text="Why the item is invalid")


class RecipientBulkOutputSerializer(serializers.Serializer):
    results = RecipientBulkResultSerializer(many=True)

    def to_representation(self, outcomes: list[RecipientBulkOutcome]) -> dict:
        results: list[dict[str, Any]] = []
        for index, outcome in enumerate(outcomes):
            result: dict[str, Any] = {"index": index, "status": outcome.status}
            if outcome.recipient_id is not None:
                result["id"] = outcome.recipient_id
            if outcome.error is not None:
                result["error"] = error_body(outcome.error)
            results.append(result)
        return {"results": results}


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_MEMBERS_PER_REQUEST,
        "items": ID_SCHEMA,
    }
)
class RecipientIdsField(serializers.ListField):
    """Recipient ids (at most MAX_MEMBERS_PER_REQUEST), each as in a path."""

    default_error_messages = {
        "too_many_items": "at most {max_length} recipients per request, got {count}",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=RecipientIdField(),
            min_length=1,
            max_length=MAX_MEMBERS_PER_REQUEST,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        if len(data) > MAX_MEMBERS_PER_REQUEST:
            self.fail("too_many_items", max_length=MAX_MEMBERS_PER_REQUEST, count=len(data))
        return super().to_internal_value(data)
