from __future__ import annotations

from rest_framework import serializers

from .models import StepExecutionLog


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
        ]


class StepLogFilterSerializer(serializers.Serializer):
    trigger = serializers.UUIDField(required=False)
    node = serializers.CharField(required=False, max_length=64)
