"""Gate tables (batch, throttle): the keyed state the gate nodes keep in PostgreSQL (never only
in Redis), each gate in a section of its own.

Batches: at most one batch is open per (workflow, node, recipient, rendered key): a
partial unique index the opener's ``INSERT … ON CONFLICT DO NOTHING`` relies on (no lock).
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Coalesce

from notifyflow.ids import uuid7

# --- Throttles -----------------------------------------------------------------------


class ThrottleScope(models.TextChoices):
    """What a throttle counts: one node of one workflow, or one recipient across every
    workflow's throttle nodes with the same key."""

    WORKFLOW = "workflow", "Workflow (this node)"
    RECIPIENT = "recipient", "Recipient (across workflows)"


class ThrottleCounter(models.Model):
    """The hits of one throttle key in its sliding window (``gates.throttles``).

    ``hits`` is a JSON list of epoch milliseconds, oldest first: the same column on
    PostgreSQL (jsonb, pruned and appended in the one ``INSERT … ON CONFLICT`` statement)
    and SQLite. It holds at most about ``limit`` entries: a hit is only added while the
    window has room, and hits that left the window are dropped as it is written."""

    scope = models.CharField(max_length=16, choices=ThrottleScope.choices)
    # Workflow scope: "<workflow key>:<node id>"; recipient scope: the recipient's id.
    subject = models.CharField(max_length=300)
    # The node's rendered key ("" when it has none).
    key = models.CharField(max_length=255, blank=True)
    hits = models.JSONField(default=list)
    # The limit and window of the node that last wrote it (shown by the list and the
    # console; each pass uses its own node's).
    limit = models.PositiveIntegerField()
    window_ms = models.BigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "triggers_throttlecounter"  # the table it has had since the triggers app
        verbose_name = "throttle counter"
        constraints = [
            # The counter of a key: the ON CONFLICT target of every pass, and a reset or
            # a list of one subject (scope, subject[, key]).
            models.UniqueConstraint(
                fields=["scope", "subject", "key"], name="throttle_unique_scope_subject_key"
            ),
            models.CheckConstraint(
                condition=models.Q(scope__in=ThrottleScope.values), name="throttle_scope_valid"
            ),
        ]
        indexes = [
            # A reset or a list by key across subjects (DELETE /throttles/?scope=&key=
            # without workflow= or recipient=).
            models.Index(fields=["scope", "key"], name="throttle_scope_key"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.subject} {self.key!r}"


# --- Batches -------------------------------------------------------------------------


class BatchStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


class BatchCloseReason(models.TextChoices):
    """How a batch stopped taking members (``Batch.close_reason``)."""

    WINDOW = "window", "its window ended"
    MAX_ITEMS = "max_items", "max_items reached"
    FLUSH = "flush", "flushed"
    RUN_NOW = "run_now", "run now on its opener"
    OPENER_CANCELLED = "opener_cancelled", "its opener was cancelled"


class Batch(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of its own: batch_one_open_per_key leads with it (open batches of a
    # workflow), and the API's ?workflow= filter is served by batch_workflow_status.
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.PROTECT, related_name="batches", db_index=False
    )
    node_id = models.CharField(max_length=64)
    # The instances' recipient (null: payload-only instances, or erased since).
    recipient = models.ForeignKey(
        "recipients.Recipient",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="batches",
        db_index=False,
    )
    # The node's rendered ``key`` ("" when it has none).
    key = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=16, choices=BatchStatus.choices, default=BatchStatus.OPEN)
    # The instance that opened it: it continues with the digest when the batch closes.
    # No index of its own: batch_opener serves "open batches opened by these instances".
    opener = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    opened_at = models.DateTimeField()
    closes_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    # How it closed (or was cancelled), set with ``closed_at`` by the one statement that
    # closes it; and who closed it, the actor of a close or a flush (null: a max_items
    # close, or a batch closed before migration 0021).
    close_reason = models.CharField(
        max_length=16, choices=BatchCloseReason.choices, null=True, blank=True
    )
    closed_by = models.CharField(max_length=200, null=True, blank=True)
    max_items = models.PositiveIntegerField(null=True, blank=True)
    # Arrivals so far (the opener included); the digest leaves cancelled members out.
    item_count = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "triggers_batch"  # the table it has had since the triggers app
        ordering = ["-opened_at"]
        verbose_name_plural = "batches"
        constraints = [
            # One open batch per (workflow, node, recipient, key): the join's UPDATE finds
            # it (WHERE … AND status = 'open'), the open's INSERT … ON CONFLICT DO NOTHING
            # collides on it. A payload-only batch (recipient null) counts as "".
            models.UniqueConstraint(
                "workflow",
                "node_id",
                Coalesce("recipient", models.Value("")),
                "key",
                name="batch_one_open_per_key",
                condition=models.Q(status="open"),
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=BatchStatus.values), name="batch_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(max_items__isnull=True) | models.Q(max_items__gte=2),
                name="batch_max_items_valid",
            ),
        ]
        indexes = [
            # GET /api/v1/batches/?workflow=&status= (newest first) and the admin's list
            # filtered by workflow.
            models.Index(fields=["workflow", "status", "-opened_at"], name="batch_workflow_status"),
            # GET /api/v1/batches/?status= and the admin's status filter (newest first).
            models.Index(fields=["status", "-opened_at"], name="batch_status_opened"),
            # GET /api/v1/batches/?recipient= (newest first).
            models.Index(fields=["recipient", "-opened_at"], name="batch_recipient"),
            # The cancel receiver (open batches opened by the cancelled instances) and
            # retention's delete of old instances (CASCADE finds their batches).
            models.Index(fields=["opener"], name="batch_opener"),
        ]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.status}, {self.item_count} item(s))"


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items", db_index=False)
    instance = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Arrival order in its batch: 1 (the opener), 2, … with no gaps.
    seq = models.PositiveIntegerField()
    joined_at = models.DateTimeField()

    class Meta:
        db_table = "triggers_batchitem"  # the table it has had since the triggers app
        ordering = ["batch", "seq"]
        constraints = [
            # The digest (items in arrival order) and the close (every member of a
            # batch); a seq is taken once.
            models.UniqueConstraint(fields=["batch", "seq"], name="batchitem_unique_seq"),
            # "Is this instance already in a batch?" (a re-run after a crash; instance
            # first), and an instance joins a batch once.
            models.UniqueConstraint(fields=["instance", "batch"], name="batchitem_unique_instance"),
        ]

    def __str__(self) -> str:
        return f"item {self.seq} of batch {self.batch_id}"
