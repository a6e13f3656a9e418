"""Throttle counters of ``throttle`` nodes: the list's filters and rows, the reset's parameters."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from api.fields import QuerySerializer
from gates.models import ThrottleCounter, ThrottleScope
from gates.throttles import MAX_KEY_LENGTH, ThrottleState, throttle_state

SCOPE_HELP = (
    "workflow: a throttle node of a workflow (narrow with workflow= and node=); "
    "recipient: a recipient across workflows (narrow with recipient=)."
)


class ThrottleFilterSerializer(QuerySerializer):
    scope = serializers.ChoiceField(
        choices=ThrottleScope.choices, required=False, help_text=SCOPE_HELP
    )
    key = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_KEY_LENGTH,
        trim_whitespace=False,
        help_text="The rendered key (`key=` alone: the empty key of a node without one).",
    )
    workflow = serializers.SlugField(required=False, max_length=100, help_text="Workflow key.")
    node = serializers.RegexField(
        r"^[A-Za-z0-9_-]{1,64}$", required=False, help_text="Node id (with workflow scope)."
    )
    recipient = serializers.CharField(required=False, max_length=255, help_text="Recipient id.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        scope = attrs.get("scope")
        if scope == ThrottleScope.RECIPIENT:
            for name in ("workflow", "node"):
                if name in attrs:
                    raise serializers.ValidationError(
                        {name: "only with scope=workflow (recipient counters span workflows)"},
                        code="scope_mismatch",
                    )
        if scope == ThrottleScope.WORKFLOW and "recipient" in attrs:
            raise serializers.ValidationError(
                {"recipient": "only with scope=recipient"}, code="scope_mismatch"
            )
        return attrs


class ThrottleResetQuerySerializer(ThrottleFilterSerializer):
    scope = serializers.ChoiceField(choices=ThrottleScope.choices, help_text=SCOPE_HELP)
    key = serializers.CharField(
        allow_blank=True,
        max_length=MAX_KEY_LENGTH,
        trim_whitespace=False,
        help_text="The rendered key to reset (`key=` alone: the empty key).",
    )


class ThrottleOutputSerializer(serializers.ModelSerializer):
    workflow = serializers.SerializerMethodField()
    node = serializers.SerializerMethodField()
    recipient = serializers.SerializerMethodField()
    count = serializers.SerializerMethodField(help_text="Hits in the window now.")
    oldest_hit = serializers.SerializerMethodField()
    next_room_at = serializers.SerializerMethodField(
        help_text="When the next instance may pass: now if there is room."
    )

    class Meta:
        model = ThrottleCounter
        fields = [
            "scope",
            "subject",
            "key",
            "workflow",
            "node",
            "recipient",
            "count",
            "limit",
            "window_ms",
            "oldest_hit",
            "next_room_at",
            "updated_at",
        ]

    def _state(self, obj: ThrottleCounter) -> ThrottleState:
        """Each row's state once, all at the same ``now`` (the list's instant)."""
        if not hasattr(self, "_states"):
            self._now = timezone.now()
            self._states: dict[int, ThrottleState] = {}
        if obj.pk not in self._states:
            self._states[obj.pk] = throttle_state(obj, now=self._now)
        return self._states[obj.pk]

    def get_workflow(self, obj: ThrottleCounter) -> str | None:
        return obj.subject.split(":", 1)[0] if obj.scope == ThrottleScope.WORKFLOW else None

    def get_node(self, obj: ThrottleCounter) -> str | None:
        if obj.scope != ThrottleScope.WORKFLOW or ":" not in obj.subject:
            return None
        return obj.subject.split(":", 1)[1]

    def get_recipient(self, obj: ThrottleCounter) -> str | None:
        return obj.subject if obj.scope == ThrottleScope.RECIPIENT else None

    def get_count(self, obj: ThrottleCounter) -> int:
        return int(self._state(obj).count)

    def get_oldest_hit(self, obj: ThrottleCounter) -> str | None:
        oldest = self._state(obj).oldest_hit
        return None if oldest is None else oldest.isoformat()

    def get_next_room_at(self, obj: ThrottleCounter) -> str:
        return str(self._state(obj).next_room_at.isoformat())


class ThrottleResetOutputSerializer(serializers.Serializer):
    reset = serializers.IntegerField(help_text="How many counters were deleted.")
