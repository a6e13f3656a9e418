"""Triggering people: the ``recipients`` of POST /triggers/ (and of each
``triggers/bulk/`` item), the per-recipient answer, fan-outs and cancel by key."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from notifyflow.text import key_pattern, printable_problem
from recipients.ids import recipient_id_problem
from triggers.models.fanouts import FanOut, FanOutStatus
from triggers.services import (
    MAX_RECIPIENTS,
    KeyCancelResult,
    PeopleTriggerResult,
    RecipientEntry,
)
from workflows.models import Workflow

from .recipients import ID_SCHEMA, MAX_RECIPIENT_ID_LENGTH, InlineRecipientSerializer

_LIST_KEY = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": key_pattern()}
_ENTRY_SCHEMA = {
    "oneOf": [
        ID_SCHEMA,
        {"$ref": "#/components/schemas/InlineRecipient"},
        {
            "type": "object",
            "properties": {"list": _LIST_KEY},
            "required": ["list"],
            "additionalProperties": False,
        },
    ]
}


@extend_schema_field(
    {"type": "array", "minItems": 1, "maxItems": MAX_RECIPIENTS, "items": _ENTRY_SCHEMA}
)
class RecipientsField(serializers.Field):
    """Up to MAX_RECIPIENTS entries: a recipient id (created empty if unknown), an inline
    recipient ``{id, email?, phone?, timezone?, locale?, properties?, channel_data?}``
    (upserted), or ``{list: key}``. A bad entry is a 400 naming ``recipients[i]`` with its
    code."""

    default_error_messages = {
        "not_a_list": "must be a list of recipient ids, recipient objects or {{list: key}}",
        "too_many_recipients": "at most {max} entries, got {count}",
        "empty_recipients": "name at least one recipient, or leave `recipients` out",
    }

    def to_internal_value(self, data: Any) -> list[RecipientEntry]:
        if not isinstance(data, list):
            self.fail("not_a_list")
        if not data:
            self.fail("empty_recipients")
        if len(data) > MAX_RECIPIENTS:
            self.fail("too_many_recipients", max=MAX_RECIPIENTS, count=len(data))
        entries: list[RecipientEntry] = []
        errors: list[Any] = []
        # One serializer for every inline entry (a new one per entry deep-copies its
        # fields: most of a 100-recipient POST's validation).
        inline = InlineRecipientSerializer()
        for raw in data:
            try:
                entries.append(_entry(raw, inline))
                errors.append([])
            except serializers.ValidationError as exc:
                errors.append(exc.detail)
        if any(errors):
            # Per index, so the error names ``recipients[i]`` (api_errors._flatten).
            raise serializers.ValidationError(errors)
        return entries

    def to_representation(self, value: Any) -> Any:
        return value


def _entry(raw: Any, inline: InlineRecipientSerializer) -> RecipientEntry:
    if isinstance(raw, str):
        _refuse(recipient_id_problem(raw))
        if not raw.strip() or len(raw) > MAX_RECIPIENT_ID_LENGTH:
            raise serializers.ValidationError(
                [
                    ErrorDetail(
                        f"a recipient id is 1 to {MAX_RECIPIENT_ID_LENGTH} characters",
                        code="invalid_recipient",
                    )
                ]
            )
        return RecipientEntry(id=raw)
    if isinstance(raw, dict) and "list" in raw:
        key = raw["list"]
        if set(raw) != {"list"} or not isinstance(key, str) or not key or len(key) > 100:
            raise serializers.ValidationError(
                [ErrorDetail("a list entry is {list: key} and nothing else", code="invalid_list")]
            )
        _refuse(printable_problem(key))
        return RecipientEntry(list_key=key)
    if isinstance(raw, dict):
        fields = dict(inline.run_validation(raw))
        return RecipientEntry(id=fields.pop("id"), fields=fields)
    raise serializers.ValidationError(
        [
            ErrorDetail(
                "must be a recipient id, a recipient object or {list: key}",
                code="invalid_recipient",
            )
        ]
    )


def _refuse(problem: tuple[str, str] | None) -> None:
    """An entry's id or list key that is not printable (or not a possible id)."""
    if problem is not None:
        raise serializers.ValidationError([ErrorDetail(problem[1], code=problem[0])])


class FanOutOutputSerializer(serializers.ModelSerializer):
    """A list fan-out job and its progress (GET /api/v1/fanouts/{id}/)."""

    workflow: serializers.SlugRelatedField[Workflow] = serializers.SlugRelatedField(
        slug_field="key", read_only=True
    )
    status = serializers.ChoiceField(choices=FanOutStatus.choices)

    class Meta:
        model = FanOut
        fields = [
            "id",
            "workflow",
            "idempotency_key",
            "lists",
            "status",
            "expected",
            "created",
            "duplicates",
            "position",
            "created_at",
            "updated_at",
            "finished_at",
        ]


class FanOutSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=FanOutStatus.choices)
    expected = serializers.IntegerField()


class RecipientInstanceSerializer(serializers.Serializer):
    recipient = serializers.CharField()
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["created", "duplicate"])


class PeopleTriggerOutputSerializer(serializers.Serializer):
    """The answer to a trigger naming recipients."""

    workflow = serializers.CharField()
    idempotency_key = serializers.CharField()
    instances = RecipientInstanceSerializer(many=True)
    fanout = FanOutSummarySerializer(required=False)

    def to_representation(self, result: PeopleTriggerResult) -> dict[str, Any]:
        # Built directly (up to 1,000 instances): the fields above are the schema.
        data: dict[str, Any] = {
            "workflow": result.workflow.key,
            "idempotency_key": result.idempotency_key,
            "instances": [
                {"recipient": i.recipient, "id": str(i.id), "status": i.status}
                for i in result.instances
            ],
        }
        if result.fanout is not None:
            data["fanout"] = fanout_summary(result.fanout)
        return data


def fanout_summary(fanout: FanOut) -> dict[str, Any]:
    return {"id": str(fanout.pk), "status": fanout.status, "expected": fanout.expected}


class KeyCancelOutputSerializer(serializers.Serializer):
    """Cancel by key of a trigger that named recipients."""

    workflow = serializers.CharField()
    idempotency_key = serializers.CharField()
    cancelled = serializers.IntegerField(help_text="Instances cancelled now")
    already_finished = serializers.IntegerField()
    fanout = FanOutSummarySerializer(allow_null=True)

    def to_representation(self, result: KeyCancelResult) -> dict[str, Any]:
        return {
            "workflow": result.workflow.key,
            "idempotency_key": result.idempotency_key,
            "cancelled": result.cancelled,
            "already_finished": result.already_finished,
            "fanout": fanout_summary(result.fanout) if result.fanout else None,
        }
