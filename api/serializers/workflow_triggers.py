"""Workflow triggers (bindings of an event name to a workflow): the input serializers
are the validation (and the OpenAPI schema); ``triggers.events`` takes typed arguments."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import (
    InputSerializer,
    JsonObjectField,
    KeyField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
)
from triggers.events import MAX_EVENT_ID_LENGTH, MAX_EVENT_NAME_LENGTH
from triggers.idempotency.config import (
    MAX_CONTEXT_FIELD_LENGTH,
    MAX_CONTEXT_FIELDS,
    MAX_EXPRESSION_LENGTH,
    MAX_TTL_MINUTES,
    Strategy,
)
from triggers.models.events import WorkflowTrigger
from workflows.models import Workflow


def _option(schema: dict) -> dict:
    """An option's schema: null is its default (OpenAPI 3.0 wants null in an enum too)."""
    if "enum" in schema:
        schema = {**schema, "enum": [*schema["enum"], None]}
    return {**schema, "nullable": True}


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "strategy": _option({"type": "string", "enum": [s.value for s in Strategy]}),
            "ttlMinutes": _option({"type": "integer", "minimum": 1, "maximum": MAX_TTL_MINUTES}),
            "contextFields": _option(
                {
                    "type": "array",
                    "maxItems": MAX_CONTEXT_FIELDS,
                    "items": {"type": "string", "maxLength": MAX_CONTEXT_FIELD_LENGTH},
                }
            ),
            "includeTriggerId": _option({"type": "boolean"}),
            "includeEventType": _option({"type": "boolean"}),
            "includeEventId": _option({"type": "boolean"}),
            "customExpression": _option({"type": "string", "maxLength": MAX_EXPRESSION_LENGTH}),
            "failOnMissingContext": _option({"type": "boolean"}),
        },
    }
)
class IdempotencySettingField(JsonObjectField):
    """How the binding's idempotency keys are made (a JSON object; {} or absent: UUID).
    Rules across options are checked at save, naming the option."""


class WorkflowTriggerInputSerializer(InputSerializer):
    event_name = StrictCharField(max_length=MAX_EVENT_NAME_LENGTH)
    workflow = KeyField(max_length=100, help_text="Workflow key")
    is_active = StrictBooleanField(default=True)
    idempotency_setting = IdempotencySettingField(
        help_text="{} or absent: UUID. TIME_WINDOW and CONTEXT_TIME_WINDOW need "
        "ttlMinutes; CONTEXT_BASED and CONTEXT_TIME_WINDOW a non-empty contextFields; "
        "CUSTOM_EXPRESSION a customExpression; EVENT_BASED includeEventType or "
        "includeEventId. Options: strategy, ttlMinutes, contextFields, includeTriggerId, "
        "includeEventType, includeEventId, customExpression, failOnMissingContext",
    )


class WorkflowTriggerOutputSerializer(serializers.ModelSerializer):
    workflow: serializers.SlugRelatedField[Workflow] = serializers.SlugRelatedField(
        slug_field="key", read_only=True
    )

    class Meta:
        model = WorkflowTrigger
        fields = [
            "id",
            "event_name",
            "workflow",
            "is_active",
            "idempotency_setting",
            "created_at",
            "updated_at",
        ]


class WorkflowTriggerFilterSerializer(QuerySerializer):
    event_name = serializers.CharField(required=False, max_length=200)
    workflow = serializers.SlugField(required=False)


class PreviewKeyInputSerializer(InputSerializer):
    # The API's field name; mypy sees it shadow DRF's own ``context``.
    context = JsonObjectField()  # type: ignore[assignment]
    event_id = KeyField(
        max_length=MAX_EVENT_ID_LENGTH, required=False, allow_null=True, default=None
    )
    at = serializers.DateTimeField(
        required=False,
        default=None,
        allow_null=True,
        help_text="ISO-8601 instant (UTC unless an offset is given); default now",
    )


class PreviewKeyOutputSerializer(serializers.Serializer):
    idempotency_key = serializers.CharField()
    strategy = serializers.CharField()
    random = serializers.BooleanField(help_text="True for NONE/UUID: a new key every time")
    note = serializers.CharField(allow_null=True)
