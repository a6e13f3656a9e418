"""Batches (docs/api.md#batches): a batch node's open/closed/cancelled batches and their items."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.fields import QuerySerializer
from gates.models import Batch, BatchItem, BatchStatus
from workflows.models import Workflow


class BatchOutputSerializer(serializers.ModelSerializer):
    workflow: serializers.SlugRelatedField[Workflow] = serializers.SlugRelatedField(
        slug_field="key", read_only=True
    )
    recipient = serializers.CharField(source="recipient_id", read_only=True, allow_null=True)
    opener = serializers.UUIDField(source="opener_id", read_only=True)

    class Meta:
        model = Batch
        fields = [
            "id",
            "workflow",
            "node_id",
            "recipient",
            "key",
            "status",
            "opener",
            "opened_at",
            "closes_at",
            "closed_at",
            "max_items",
            "item_count",
        ]


class BatchItemOutputSerializer(serializers.ModelSerializer):
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    instance_status = serializers.CharField(source="instance.status", read_only=True)

    class Meta:
        model = BatchItem
        fields = ["instance", "seq", "joined_at", "instance_status"]


class BatchDetailOutputSerializer(BatchOutputSerializer):
    items = serializers.SerializerMethodField()

    class Meta(BatchOutputSerializer.Meta):
        fields = [*BatchOutputSerializer.Meta.fields, "items"]

    def get_items(self, batch: Batch) -> list[dict[str, Any]]:
        items = self.context.get("items", [])
        return BatchItemOutputSerializer(items, many=True).data  # type: ignore[return-value]


class BatchFilterSerializer(QuerySerializer):
    workflow = serializers.SlugField(required=False, help_text="A workflow key")
    recipient = serializers.CharField(required=False, max_length=255, help_text="A recipient id")
    status = serializers.ChoiceField(choices=BatchStatus.values, required=False)
