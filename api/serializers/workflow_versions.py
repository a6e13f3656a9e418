"""A workflow's versions: the history list, one version, a diff between two."""

from __future__ import annotations

from rest_framework import serializers

from api.fields import QueryIntegerField, QuerySerializer
from workflows.models import WorkflowVersion

from .workflows import DefinitionField


class WorkflowVersionOutputSerializer(serializers.ModelSerializer):
    """A version of a workflow: immutable once written."""

    # The view passes the workflow's current_version_id in the context: read once per list.
    is_current = serializers.SerializerMethodField(
        help_text="Whether it is the version new triggers use"
    )

    class Meta:
        model = WorkflowVersion
        fields = ["version", "message", "created_by", "created_at", "is_current"]

    def get_is_current(self, version: WorkflowVersion) -> bool:
        return version.pk == self.context.get("current_version_id")


class WorkflowVersionDetailOutputSerializer(WorkflowVersionOutputSerializer):
    definition = DefinitionField(read_only=True)

    class Meta(WorkflowVersionOutputSerializer.Meta):
        fields = [*WorkflowVersionOutputSerializer.Meta.fields, "definition"]


class VersionDiffQuerySerializer(QuerySerializer):
    """The query string of GET /workflows/{key}/versions/{version}/diff/."""

    against = QueryIntegerField(
        min_value=1,
        required=False,
        help_text="The version to compare with; the one before by default (for version 1, "
        "nothing: the whole definition shows as added)",
    )


class VersionDiffOutputSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    against = serializers.IntegerField(
        allow_null=True, help_text="null: the first version, diffed against nothing"
    )
    diff = serializers.CharField(
        allow_blank=True,
        help_text="A unified diff of the normalised definitions (keys sorted, two-space "
        "indents), from `against` to `version`; empty when they are equal",
    )
