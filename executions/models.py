from __future__ import annotations

from django.db import models


class StepExecutionLog(models.Model):
    """One immutable row per executed node attempt."""

    trigger = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="step_logs"
    )
    # No index of its own: steplog_workflow_node_success leads with it.
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.CASCADE, related_name="step_logs", db_index=False
    )
    workflow_version = models.PositiveIntegerField()
    node_id = models.CharField(max_length=64)
    node_type = models.CharField(max_length=16)
    attempt = models.PositiveIntegerField(help_text="1 for the first try of this node")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    input_context = models.JSONField(default=dict)
    output = models.JSONField(default=dict, blank=True)
    success = models.BooleanField()
    error = models.TextField(blank=True, default="")
    error_kind = models.CharField(
        max_length=16, blank=True, default="", help_text="transient, permanent or lease_expired"
    )
    task_id = models.CharField(max_length=64, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["started_at", "id"]
        indexes = [
            # GET /triggers/{id}/steps/ and the admin inline: by trigger, oldest first.
            models.Index(fields=["trigger", "started_at"], name="steplog_trigger_started"),
            # GET /step-logs/?node= and the admin filter.
            models.Index(fields=["node_id", "-started_at"], name="steplog_node_started"),
            # GET /workflows/{key}/stats/: executions, successes and failures per node,
            # as an index-only scan of one workflow's entries (executions.selectors).
            models.Index(
                fields=["workflow", "node_id", "success"], name="steplog_workflow_node_success"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trigger_id}:{self.node_id}#{self.attempt}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("step execution logs are immutable")
        super().save(*args, **kwargs)

    @property
    def duration_ms(self) -> float:
        return (self.finished_at - self.started_at).total_seconds() * 1000


class DeliveryStatus(models.TextChoices):
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    """The guard around a provider call: one row per (instance, node).

    ``sent`` means the provider accepted the message; it is never sent again.
    ``sending`` means a send started and its outcome is unknown (the worker died or lost
    its lease between the provider call and recording the result) - the one window
    that stays at-least-once.
    """

    instance = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="deliveries"
    )
    node_id = models.CharField(max_length=64)
    channel = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    provider_message_id = models.CharField(max_length=255, blank=True, default="")
    output = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "node_id"], name="delivery_unique_instance_node"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id}:{self.node_id} {self.status}"
