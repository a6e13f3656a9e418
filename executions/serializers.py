from __future__ import annotations

from typing import Any

from rest_framework import serializers

from notifyflow.fields import InputSerializer, JsonObjectField, QuerySerializer, StrictIntegerField
from notifyflow.redaction import redact
from triggers.serializers import StatusChangeOutputSerializer, TriggerOutputSerializer

from .models import Delivery, DeliveryAttempt, DeliveryEvent, StepExecutionLog


class StepLogOutputSerializer(serializers.ModelSerializer):
    trigger = serializers.UUIDField(source="trigger_id", read_only=True)
    workflow = serializers.SlugRelatedField(slug_field="key", read_only=True)
    duration_ms = serializers.FloatField(read_only=True)

    class Meta:
        model = StepExecutionLog
        fields = [
            "id",
            "trigger",
            "workflow",
            "workflow_version",
            "node_id",
            "node_type",
            "attempt",
            "started_at",
            "finished_at",
            "duration_ms",
            "input_context",
            "output",
            "success",
            "error",
            "error_kind",
            "task_id",
            "worker",
            "parked",
        ]

    def to_representation(self, instance: StepExecutionLog) -> dict[str, Any]:
        data = super().to_representation(instance)
        context = data.get("input_context")
        if isinstance(context, dict) and isinstance(context.get("payload"), dict):
            data["input_context"] = {**context, "payload": redact(context["payload"])}
        return data


class StepLogFilterSerializer(QuerySerializer):
    trigger = serializers.UUIDField(required=False)
    node = serializers.CharField(required=False, max_length=64)


class WaitingForSerializer(serializers.Serializer):
    event = serializers.CharField()
    deadline = serializers.DateTimeField(allow_null=True)


class PendingOutputSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    node_type = serializers.CharField()
    due_at = serializers.DateTimeField()
    waiting_for = WaitingForSerializer(allow_null=True)


class InboxItemOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    event_id = serializers.CharField(allow_null=True)
    context = serializers.DictField()
    received_at = serializers.DateTimeField()
    consumed_at = serializers.DateTimeField(allow_null=True)
    consumed_by_node = serializers.CharField(allow_null=True)


class TimelineOutputSerializer(serializers.Serializer):
    """GET /triggers/{id}/timeline/."""

    instance = TriggerOutputSerializer()
    history = StatusChangeOutputSerializer(many=True)
    steps = StepLogOutputSerializer(many=True)
    inbox = InboxItemOutputSerializer(many=True)
    pending = PendingOutputSerializer(allow_null=True)


class NodeStatsOutputSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    executions = serializers.IntegerField()
    successes = serializers.IntegerField()
    failures = serializers.IntegerField()


class WorkflowStatsOutputSerializer(serializers.Serializer):
    """GET /workflows/{key}/stats/."""

    instances = serializers.DictField(
        child=serializers.IntegerField(), help_text="Instances per status (every status)"
    )
    nodes = NodeStatsOutputSerializer(many=True)


class DeliveryAttemptOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = ["attempt", "provider", "outcome", "latency_ms", "error", "message_id", "at"]


class DeliveryEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryEvent
        fields = [
            "provider",
            "provider_event",
            "status",
            "applied",
            "occurred_at",
            "received_at",
            "raw",
        ]


class DeliveryOutputSerializer(serializers.ModelSerializer):
    """A delivery with every provider call (failover) and every status report."""

    trigger = serializers.UUIDField(source="instance_id", read_only=True)
    provider_attempts = DeliveryAttemptOutputSerializer(
        source="attempt_rows", many=True, read_only=True
    )
    events = DeliveryEventOutputSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "trigger",
            "node_id",
            "channel",
            "status",
            "tracking_status",
            "tracking_updated_at",
            "provider_message_id",
            "attempts",
            "output",
            "created_at",
            "updated_at",
            "provider_attempts",
            "events",
        ]


class PreviewInputSerializer(InputSerializer):
    payload = JsonObjectField()
    version = StrictIntegerField(required=False, min_value=1)


class PreviewNodeSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    type = serializers.CharField()
    rendered = serializers.JSONField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    note = serializers.CharField(required=False)


class PreviewOutputSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    version = serializers.IntegerField()
    path = serializers.ListField(child=serializers.CharField())
    nodes = PreviewNodeSerializer(many=True)
