"""Step logs: one row per node execution attempt."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.fields import QuerySerializer
from executions.models import SkipReason, StepExecutionLog
from notifyflow.redaction import redact
from workflows.models import Workflow


class StepLogOutputSerializer(serializers.ModelSerializer):
    trigger = serializers.UUIDField(source="trigger_id", read_only=True)
    workflow: serializers.SlugRelatedField[Workflow] = serializers.SlugRelatedField(
        slug_field="key", read_only=True
    )
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
            "skip_reason",
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
    skip_reason = serializers.ChoiceField(
        choices=SkipReason.choices,
        required=False,
        help_text="Only the steps that chose not to send, for this reason (a skip is a success).",
    )
