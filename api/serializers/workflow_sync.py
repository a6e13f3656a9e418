"""``POST /workflows/sync/``: the workflows as in a repository's files. Each item is
checked by the same reader as the files (``workflows.sync.specs_from_documents``, every
problem listed); this serializer checks the envelope and describes it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import InputSerializer, StrictBooleanField, StrictCharField
from workflows.sync import SyncStatus

from .workflows import WorkflowInputSerializer

MAX_WORKFLOWS = 1000


@extend_schema_field(WorkflowInputSerializer(many=True))
class SyncWorkflowsField(serializers.ListField):
    """A list of workflow documents (any JSON here; the sync service checks each)."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.JSONField(), max_length=MAX_WORKFLOWS, **kwargs)


class WorkflowSyncInputSerializer(InputSerializer):
    workflows = SyncWorkflowsField(
        help_text="Every workflow, as its workflow.json without $schema (no field@ file "
        "references: the text itself). A setting left out takes its default (active, not "
        "critical, no categories, normal priority, no concurrency limit)"
    )
    dry_run = StrictBooleanField(default=False, help_text="Answer what would change; write nothing")
    prune = StrictBooleanField(
        default=False,
        help_text="Deactivate (never delete) workflows that are not listed. A key limited "
        "to workflows prunes only among them",
    )
    message = StrictCharField(
        default="", allow_blank=True, max_length=500, help_text="Kept on each new version"
    )


class SyncResultSerializer(serializers.Serializer):
    key = serializers.CharField()
    status = serializers.ChoiceField(choices=[status.value for status in SyncStatus])
    version = serializers.IntegerField(
        required=False,
        help_text="Its current version once synced (before, for a dry run); absent for a "
        "workflow a dry run would create",
    )
    diff = serializers.CharField(
        required=False,
        help_text="Unified diff of its settings and normalised definition, when it changes",
    )


class WorkflowSyncOutputSerializer(serializers.Serializer):
    results = SyncResultSerializer(many=True)
