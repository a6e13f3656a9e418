"""Workflow triggers (event name → workflow bindings) and the record of received events.

Imported by ``triggers/models.py`` so Django registers them in the ``triggers`` app.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from ..idempotency import IdempotencySettings, SettingsError, default_setting_json


class WorkflowTrigger(models.Model):
    """Binds an event name to a workflow, with the idempotency setting of its keys."""

    event_name = models.CharField(max_length=200)
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.CASCADE, related_name="event_triggers"
    )
    is_active = models.BooleanField(default=True)
    # Normalized IdempotencySettings.to_json(); validated on every save path (API, admin,
    # model clean). A row edited by hand into something invalid runs as UUID.
    idempotency_setting = models.JSONField(default=default_setting_json, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["event_name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(event_name=""), name="workflow_trigger_event_name_not_empty"
            ),
        ]
        indexes = [
            # Event fan-out: "active bindings for this event_name" (triggers.events);
            # partial, so switched-off bindings never enter it.
            models.Index(
                fields=["event_name"],
                name="wftrigger_active_by_event",
                condition=models.Q(is_active=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_name} → {self.workflow_id}"

    @property
    def parsed_setting(self) -> IdempotencySettings:
        """The parsed setting. Raises SettingsError when the stored value is invalid."""
        return IdempotencySettings.parse(self.idempotency_setting)

    @property
    def strategy_label(self) -> str:
        try:
            return self.parsed_setting.strategy.value
        except SettingsError:
            return "invalid (runs as UUID)"

    def clean(self) -> None:
        try:
            self.idempotency_setting = self.parsed_setting.to_json()
        except SettingsError as exc:
            raise ValidationError({"idempotency_setting": str(exc)}) from exc


class EventRecord(models.Model):
    """One row per event received by POST /api/v1/events/, with what each binding did.

    The context itself is not kept (it is the payload of the created instances); its
    sha256 lets an operator tell whether two deliveries carried the same data.
    """

    name = models.CharField(max_length=200)
    event_id = models.CharField(max_length=255, null=True, blank=True)
    context_sha256 = models.CharField(max_length=64)
    outcomes = models.JSONField(default=list, blank=True)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            # Admin list and "events of this name, newest first".
            models.Index(fields=["name", "-received_at"], name="event_record_name_received"),
            models.Index(fields=["-received_at"], name="event_record_received"),
            # Admin search by event id.
            models.Index(fields=["event_id"], name="event_record_event_id"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.event_id or 'no id'})"

    @property
    def outcome_counts(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes or []:
            status = outcome.get("status", "?") if isinstance(outcome, dict) else "?"
            counts[status] = counts.get(status, 0) + 1
        return counts
