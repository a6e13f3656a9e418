"""Events (POST /events/): the input serializer is the validation (and the OpenAPI
schema); ``triggers.events`` takes typed arguments."""

from __future__ import annotations

from rest_framework import serializers

from api.fields import InputSerializer, JsonObjectField, KeyField, StrictCharField
from triggers.events import MAX_EVENT_ID_LENGTH, MAX_EVENT_NAME_LENGTH
from triggers.inbox import MAX_SUBJECTS
from triggers.models.events import EventRecord

from .trigger_recipients import FanOutSummarySerializer, RecipientInstanceSerializer


class EventInputSerializer(InputSerializer):
    name = StrictCharField(max_length=MAX_EVENT_NAME_LENGTH)
    event_id = KeyField(
        max_length=MAX_EVENT_ID_LENGTH, required=False, allow_null=True, default=None
    )
    # The API's field name; mypy sees it shadow DRF's own ``context``.
    context = JsonObjectField(help_text="Becomes the instances' payload")  # type: ignore[assignment]
    subjects = serializers.ListField(
        child=StrictCharField(max_length=255),
        required=False,
        default=list,
        max_length=MAX_SUBJECTS,
        help_text="Deliver the event to running instances with one of these interests "
        "(e.g. order:42, instance:<id>)",
    )


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
    code = serializers.CharField(
        allow_null=True,
        help_text="Why a binding was skipped (`missing_context`, `inactive_workflow`, ...); "
        "`idempotency_conflict`: the key's instance is one this API key may not read (no "
        "`instance_id` is given)",
    )
    instances = RecipientInstanceSerializer(
        many=True,
        required=False,
        help_text="When the event's `context.recipients` named people: one per recipient",
    )
    fanout = FanOutSummarySerializer(required=False, help_text="Their lists' fan-out")


class EventOutputSerializer(serializers.Serializer):
    event = EventRecordSerializer()
    outcomes = BindingOutcomeSerializer(many=True)
    delivered = serializers.IntegerField(help_text="Running instances the event reached")
    instances = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Up to 100 of their ids; a `trigger` key sees only the ids of instances "
        "it created",
    )
