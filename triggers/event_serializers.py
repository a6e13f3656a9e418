"""Input and output of the events and workflow-trigger API: the input serializers are
the validation (and the OpenAPI schema); ``triggers.events`` takes typed arguments."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from notifyflow.fields import (
    InputSerializer,
    JsonObjectField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
)

from .event_models import EventRecord, WorkflowTrigger
from .events import MAX_EVENT_ID_LENGTH, MAX_EVENT_NAME_LENGTH
from .idempotency.config import (
    MAX_CONTEXT_FIELD_LENGTH,
    MAX_CONTEXT_FIELDS,
    MAX_EXPRESSION_LENGTH,
    MAX_TTL_MINUTES,
    Strategy,
)
from .inbox import MAX_SUBJECTS


class EventInputSerializer(InputSerializer):
    name = StrictCharField(max_length=MAX_EVENT_NAME_LENGTH)
    event_id = StrictCharField(
        max_length=MAX_EVENT_ID_LENGTH, required=False, allow_null=True, default=None
    )
    context = JsonObjectField(help_text="Becomes the instances' payload")
    subjects = serializers.ListField(
        child=StrictCharField(max_length=255),
        required=False,
        default=list,
        max_length=MAX_SUBJECTS,
        help_text="Deliver the event to running instances with one of these interests "
        "(e.g. order:42, instance:<id>)",
    )


class InstanceEventInputSerializer(InputSerializer):
    name = StrictCharField(max_length=MAX_EVENT_NAME_LENGTH)
    event_id = StrictCharField(
        max_length=MAX_EVENT_ID_LENGTH, required=False, allow_null=True, default=None
    )
    context = JsonObjectField()


class InstanceEventOutputSerializer(serializers.Serializer):
    delivered = serializers.IntegerField()


class EventRecordSerializer(serializers.ModelSerializer):
    class Meta:
        model = EventRecord
        fields = ["id", "name", "event_id", "context_sha256", "received_at"]


class BindingOutcomeSerializer(serializers.Serializer):
    binding = serializers.IntegerField()
    workflow = serializers.CharField()
    status = serializers.ChoiceField(choices=["created", "duplicate", "skipped"])
    instance_id = serializers.UUIDField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    code = serializers.CharField(
        allow_null=True,
        help_text="Why a binding was skipped (`missing_context`, `inactive_workflow`, ...); "
        "`idempotency_conflict`: the key's instance is one this API key may not read (no "
        "`instance_id` is given)",
    )


class EventOutputSerializer(serializers.Serializer):
    event = EventRecordSerializer()
    outcomes = BindingOutcomeSerializer(many=True)
    delivered = serializers.IntegerField(help_text="Running instances the event reached")
    instances = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Up to 100 of their ids; a `trigger` key sees only the ids of instances "
        "it created",
    )


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
    workflow = StrictCharField(max_length=100, help_text="Workflow key")
    is_active = StrictBooleanField(default=True)
    idempotency_setting = IdempotencySettingField(
        help_text="{} or absent: UUID. TIME_WINDOW and CONTEXT_TIME_WINDOW need "
        "ttlMinutes; CONTEXT_BASED and CONTEXT_TIME_WINDOW a non-empty contextFields; "
        "CUSTOM_EXPRESSION a customExpression; EVENT_BASED includeEventType or "
        "includeEventId. Options: strategy, ttlMinutes, contextFields, includeTriggerId, "
        "includeEventType, includeEventId, customExpression, failOnMissingContext",
    )


class WorkflowTriggerOutputSerializer(serializers.ModelSerializer):
    workflow = serializers.SlugRelatedField(slug_field="key", read_only=True)

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
    context = JsonObjectField()
    event_id = StrictCharField(
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
