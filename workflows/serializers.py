from __future__ import annotations

from rest_framework import serializers

from notifyflow.fields import (
    InputSerializer,
    QueryIntegerField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
    StrictSlugField,
)

from .models import Workflow


class WorkflowInputSerializer(InputSerializer):
    key = StrictSlugField(max_length=100)
    name = StrictCharField(max_length=200)
    is_active = StrictBooleanField(default=True)
    definition = serializers.JSONField()


class WorkflowOutputSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(
        source="current_version.version", read_only=True, allow_null=True
    )
    definition = serializers.JSONField(source="current_version.definition", read_only=True)

    class Meta:
        model = Workflow
        fields = [
            "key",
            "name",
            "is_active",
            "is_paused",
            "version",
            "definition",
            "created_at",
            "updated_at",
        ]


class DiagramQuerySerializer(QuerySerializer):
    """The query string of GET /workflows/{key}/diagram/."""

    format = serializers.ChoiceField(
        choices=["mermaid", "dot"], default="mermaid", help_text="mermaid (default) or dot"
    )
    version = QueryIntegerField(
        min_value=1, required=False, help_text="A version number; the current one if omitted"
    )
