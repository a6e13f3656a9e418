"""Workflows: their definition, diagram, stats and preview."""

from __future__ import annotations

from rest_framework import serializers

from notifyflow.fields import (
    InputSerializer,
    JsonObjectField,
    QueryIntegerField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSlugField,
)
from workflows.models import Workflow


class DefinitionField(serializers.JSONField):
    """A workflow definition: any JSON here (``validate_definition`` in the service
    checks it and names node and field); described in OpenAPI by the JSON Schema
    generated from the same specs (``api.openapi``)."""


class WorkflowInputSerializer(InputSerializer):
    key = StrictSlugField(max_length=100, help_text="Stable identifier, e.g. welcome-series")
    name = StrictCharField(max_length=200)
    is_active = StrictBooleanField(
        default=True, help_text="An inactive workflow refuses new triggers"
    )
    definition = DefinitionField(
        help_text="Nodes, edges and entry node; every save adds a version, and running "
        "instances keep the version they started on"
    )


class WorkflowOutputSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(
        source="current_version.version", read_only=True, allow_null=True
    )
    definition = DefinitionField(source="current_version.definition", read_only=True)

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
