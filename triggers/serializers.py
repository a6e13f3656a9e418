from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone
from rest_framework import serializers

from notifyflow.fields import JsonObjectField, StrictCharField
from notifyflow.redaction import redact

from .models import TriggerInstance, TriggerStatus, TriggerStatusChange
from .services import MAX_IDEMPOTENCY_KEY_LENGTH


class TriggerCreateInputSerializer(serializers.Serializer):
    """The body of POST /api/v1/triggers/."""

    workflow = StrictCharField(max_length=100, help_text="Workflow key")
    idempotency_key = StrictCharField(max_length=MAX_IDEMPOTENCY_KEY_LENGTH)
    payload = JsonObjectField(help_text="Any JSON object; templates see it as `payload`")


class CursorSerializer(serializers.Serializer):
    current_node_id = serializers.CharField(allow_null=True)


class TriggerOutputSerializer(serializers.ModelSerializer):
    workflow = serializers.SlugRelatedField(slug_field="key", read_only=True)
    workflow_version = serializers.IntegerField(source="workflow_version.version", read_only=True)
    cursor = serializers.SerializerMethodField()

    class Meta:
        model = TriggerInstance
        fields = [
            "id",
            "workflow",
            "workflow_version",
            "idempotency_key",
            "status",
            "cursor",
            "vars",
            "attempts",
            "available_at",
            "payload",
            "last_error",
            "created_at",
            "updated_at",
            "finished_at",
        ]

    def get_cursor(self, obj: TriggerInstance) -> dict:
        return {"current_node_id": obj.current_node_id}

    get_cursor.__annotations__["return"] = CursorSerializer

    def to_representation(self, obj: TriggerInstance) -> dict:
        # The same fields as declared above (they drive the OpenAPI schema), built
        # directly: DRF's per-field machinery was ~11% of a POST.
        data = {
            "id": str(obj.pk),
            "workflow": obj.workflow.key,
            "workflow_version": obj.workflow_version.version,
            "idempotency_key": obj.idempotency_key,
            "status": obj.status,
            "cursor": {"current_node_id": obj.current_node_id},
            "vars": obj.vars,
            "attempts": obj.attempts,
            "available_at": _iso(obj.available_at),
            "payload": None,
            "last_error": obj.last_error,
            "created_at": _iso(obj.created_at),
            "updated_at": _iso(obj.updated_at),
            "finished_at": _iso(obj.finished_at),
        }
        if self.with_payload():
            data["payload"] = redact(obj.payload)
        else:
            del data["payload"]  # never read: the list's query defers it
        return data

    def with_payload(self) -> bool:
        return True


def _iso(value: datetime | None) -> str | None:
    """DRF's DateTimeField format (UTC, 'Z')."""
    if value is None:
        return None
    value = timezone.localtime(value, UTC)
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class TriggerSummarySerializer(TriggerOutputSerializer):
    """A list item: the instance without its payload (ask with ``include_payload``)."""

    class Meta(TriggerOutputSerializer.Meta):
        fields = [f for f in TriggerOutputSerializer.Meta.fields if f != "payload"]

    def with_payload(self) -> bool:
        return bool(self.context.get("include_payload"))


class TriggerListFilterSerializer(serializers.Serializer):
    include_payload = serializers.BooleanField(
        required=False, default=False, help_text="Include each instance's payload"
    )
    workflow = serializers.SlugField(required=False)
    status = serializers.ChoiceField(choices=TriggerStatus.values, required=False)
    idempotency_key = serializers.CharField(required=False, max_length=255)


class CancelInputSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=2000,
        required=False,
        default="",
        allow_blank=True,
        help_text="Written into the audit row",
    )


class CancelByKeyInputSerializer(CancelInputSerializer):
    workflow = StrictCharField(max_length=100, help_text="Workflow key")
    idempotency_key = StrictCharField(max_length=MAX_IDEMPOTENCY_KEY_LENGTH)


class StatusChangeOutputSerializer(serializers.ModelSerializer):
    """One row of an instance's status history; ``from_status`` is "" for its creation."""

    class Meta:
        model = TriggerStatusChange
        fields = ["from_status", "to_status", "reason", "actor", "at"]
