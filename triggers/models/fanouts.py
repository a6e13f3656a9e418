"""A list fan-out: the job that expands a trigger's ``{list: key}`` entries
into one instance per member, asynchronously, resumably."""

from __future__ import annotations

from django.db import models

from notifyflow.ids import uuid7


class FanOutStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


class FanOut(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.PROTECT, related_name="fanouts", db_index=False
    )
    # The version the request started on: every instance of the fan-out pins it.
    workflow_version = models.ForeignKey(
        "workflows.WorkflowVersion", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    idempotency_key = models.CharField(max_length=255)
    payload = models.JSONField(default=dict)
    # The list keys to expand, and the recipient ids the request created instances for
    # itself (inline entries): left out of the expansion.
    lists = models.JSONField(default=list)
    excluded = models.JSONField(default=list, blank=True)
    # The membership, read once when the job starts (null until then), deduplicated and
    # sorted; ``position`` is how many of them are done, advanced in the same
    # transaction as each batch's instances, so a resumed job starts where it stopped.
    recipient_ids = models.JSONField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=16, choices=FanOutStatus.choices, default=FanOutStatus.RUNNING
    )
    expected = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    created_by_key = models.CharField(max_length=100, blank=True, default="")
    actor = models.CharField(max_length=200, blank=True, default="")
    # The worker running the job holds it until then; past it the sweeper re-sends it.
    locked_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "fan-out"
        constraints = [
            # One fan-out per request key (a repeated request finds it).
            models.UniqueConstraint(
                fields=["workflow", "idempotency_key"], name="fanout_unique_workflow_key"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=FanOutStatus.values), name="fanout_status_valid"
            ),
        ]
        indexes = [
            # The sweeper: running fan-outs whose worker's hold ran out.
            models.Index(
                fields=["locked_until"],
                name="fanout_running",
                condition=models.Q(status="running"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.idempotency_key} ({self.status})"
