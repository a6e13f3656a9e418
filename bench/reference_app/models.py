from __future__ import annotations

import uuid

from django.db import models


class RefTrigger(models.Model):
    """Same shape as triggers.TriggerInstance's hot columns, in its own table."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow_key = models.CharField(max_length=100)
    idempotency_key = models.CharField(max_length=255)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, default="enqueued")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_key", "idempotency_key"], name="bench_ref_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_key}:{self.idempotency_key}"


class RefStep(models.Model):
    """The *minimal durable step* reference: the hot columns of triggers.TriggerInstance
    (status, current node, lease, due time) with the same partial indexes, in its own
    table. A step is one claim UPDATE and one advance UPDATE, nothing else."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    status = models.CharField(max_length=16, default="enqueued")
    current_node_id = models.CharField(max_length=100, null=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_token = models.UUIDField(null=True)
    locked_by = models.CharField(max_length=200, default="")
    locked_until = models.DateTimeField(null=True)
    available_at = models.DateTimeField()
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["available_at"],
                name="bench_refstep_due",
                condition=models.Q(status="enqueued"),
            ),
            models.Index(
                fields=["locked_until"],
                name="bench_refstep_lease",
                condition=models.Q(status="processing"),
            ),
            models.Index(fields=["status", "-created_at"], name="bench_refstep_status"),
        ]

    def __str__(self) -> str:
        return f"{self.id}:{self.status}"
