"""Status webhook endpoints: the input serializers are the validation (and the OpenAPI
schema); ``status_webhooks.endpoints`` takes typed arguments and checks what a schema
cannot say (the allow-list, existing workflows)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from api.fields import (
    InputSerializer,
    KeyField,
    QuerySerializer,
    StrictBooleanField,
    StrictCharField,
)
from status_webhooks.endpoints import (
    MAX_DESCRIPTION_LENGTH,
    MAX_URL_LENGTH,
    MAX_WORKFLOWS,
    SUBSCRIBABLE,
)
from status_webhooks.models import (
    EVENT_TYPES,
    MessageStatus,
    WebhookAttempt,
    WebhookEndpoint,
    WebhookMessage,
)


class WebhookEndpointInputSerializer(InputSerializer):
    url = StrictCharField(
        max_length=MAX_URL_LENGTH,
        help_text="http(s) URL; its host (and port) must be allowed by "
        "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (400 `host_not_allowed`)",
    )
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=SUBSCRIBABLE),
        min_length=1,
        max_length=4 * len(SUBSCRIBABLE),
        help_text="Event types to receive; `delivery.*` means every delivery status",
    )
    workflows = serializers.ListField(
        child=KeyField(max_length=100),
        required=False,
        default=list,
        max_length=MAX_WORKFLOWS,
        help_text="Keys of existing workflows whose events to receive (400 "
        "`unknown_workflow` otherwise); empty or absent: every workflow",
    )
    is_active = StrictBooleanField(default=True)
    description = StrictCharField(
        max_length=MAX_DESCRIPTION_LENGTH, allow_blank=True, required=False, default=""
    )


class WebhookEndpointOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookEndpoint
        fields = [
            "id",
            "url",
            "description",
            "event_types",
            "workflows",
            "is_active",
            "failing_since",
            "disabled_at",
            "disabled_reason",
            "previous_secret_expires_at",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "failing_since": {
                "help_text": "The first failed attempt since the last success; after 5 "
                "days of failures the endpoint is disabled"
            },
            "previous_secret_expires_at": {
                "help_text": "After a rotation: the previous secret signs too until then"
            },
        }


class WebhookEndpointSecretOutputSerializer(WebhookEndpointOutputSerializer):
    """The endpoint with its signing secret: only in the answer to its creation and to
    a rotation."""

    class Meta(WebhookEndpointOutputSerializer.Meta):
        fields = [*WebhookEndpointOutputSerializer.Meta.fields, "secret"]
        extra_kwargs = {
            **WebhookEndpointOutputSerializer.Meta.extra_kwargs,
            "secret": {
                "help_text": "The signing secret (`whsec_` + base64): shown this once, never again"
            },
        }


class ReplayInputSerializer(InputSerializer):
    since = serializers.DateTimeField(help_text="Messages created at this instant or later")
    until = serializers.DateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="... and before this instant (default: up to now); not before `since` "
        "(400 `invalid_range`)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # A window that ends before it starts is a mistake to name, not "replayed: 0".
        until = attrs.get("until")
        if until is not None and until < attrs["since"]:
            raise serializers.ValidationError(
                {"until": [ErrorDetail("must not be before since", code="invalid_range")]}
            )
        return attrs


class ReplayOutputSerializer(serializers.Serializer):
    replayed = serializers.IntegerField(help_text="How many messages were queued again")


class WebhookAttemptOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookAttempt
        fields = ["attempted_at", "status_code", "duration_ms", "response_excerpt", "error"]


class WebhookMessageOutputSerializer(serializers.ModelSerializer):
    attempt_count = serializers.IntegerField(source="attempts", read_only=True)
    attempts = WebhookAttemptOutputSerializer(source="tries", many=True, read_only=True)

    class Meta:
        model = WebhookMessage
        fields = [
            "id",
            "event_id",
            "type",
            "instance_id",
            "sequence",
            "workflow_key",
            "data",
            "created_at",
            "status",
            "attempt_count",
            "next_attempt_at",
            "delivered_at",
            "last_status_code",
            "last_error",
            "attempts",
        ]


class WebhookMessageFilterSerializer(QuerySerializer):
    status = serializers.ChoiceField(choices=MessageStatus.choices, required=False)
    type = serializers.ChoiceField(choices=EVENT_TYPES, required=False)
