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
