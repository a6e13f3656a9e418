"""Schemas of the events and workflow-trigger API. Input is validated by the services in
``triggers.events`` (shared with the admin); these classes render output and document
the bodies for OpenAPI."""

from __future__ import annotations

from rest_framework import serializers

from .event_models import EventRecord, WorkflowTrigger


class EventInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    event_id = serializers.CharField(max_length=255, required=False, allow_null=True)
    context = serializers.DictField(required=False, help_text="Becomes the instances' payload")


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
    code = serializers.CharField(allow_null=True)


class EventOutputSerializer(serializers.Serializer):
    event = EventRecordSerializer()
    outcomes = BindingOutcomeSerializer(many=True)


class WorkflowTriggerInputSerializer(serializers.Serializer):
    event_name = serializers.CharField(max_length=200)
    workflow = serializers.SlugField(help_text="Workflow key")
    is_active = serializers.BooleanField(default=True)
    idempotency_setting = serializers.JSONField(
        required=False, help_text="strategy, ttlMinutes, contextFields, includeTriggerId, "
        "includeEventType, includeEventId, customExpression, failOnMissingContext",
    )


class WorkflowTriggerOutputSerializer(serializers.ModelSerializer):
    workflow = serializers.SlugRelatedField(slug_field="key", read_only=True)

    class Meta:
        model = WorkflowTrigger
        fields = ["id", "event_name", "workflow", "is_active", "idempotency_setting",
                  "created_at", "updated_at"]


class WorkflowTriggerFilterSerializer(serializers.Serializer):
    event_name = serializers.CharField(required=False, max_length=200)
    workflow = serializers.SlugField(required=False)


class PreviewKeyInputSerializer(serializers.Serializer):
    context = serializers.DictField(required=False)
    event_id = serializers.CharField(required=False, allow_null=True)
    at = serializers.DateTimeField(required=False, help_text="ISO-8601 instant; default now")


class PreviewKeyOutputSerializer(serializers.Serializer):
    idempotency_key = serializers.CharField()
    strategy = serializers.CharField()
    random = serializers.BooleanField(help_text="True for NONE/UUID: a new key every time")
    note = serializers.CharField(allow_null=True)
