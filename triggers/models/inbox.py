"""What reaches a running instance from outside: its interests, its inbox, and
the outbox of events its ``emit`` nodes raised.

Imported by ``triggers/models.py`` so Django registers them in the ``triggers`` app.
"""

from __future__ import annotations

from django.db import models


class Interest(models.Model):
    """A subject an instance listens to (``order:42``, ``instance:<id>``), rendered from
    the definition's ``interests`` and written in the instance's creating statement.

    Rows are kept when the instance finishes (a failed instance can be retried and must
    still hear its events); delivery joins the instance and skips finished ones, and a
    subject names one order or user, so few finished rows share it."""

    # No index of its own: interest_unique leads with it.
    instance = models.ForeignKey(
        "triggers.TriggerInstance",
        on_delete=models.CASCADE,
        related_name="interests",
        db_index=False,
    )
    subject = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance", "subject"], name="interest_unique"),
        ]
        indexes = [
            # Delivery: "instances interested in any of these subjects" (triggers.inbox).
            models.Index(fields=["subject"], name="interest_subject"),
        ]

    def __str__(self) -> str:
        return self.subject


class InboxEvent(models.Model):
    """An event delivered to one instance; a ``wait`` node consumes the oldest match."""

    # No index of its own: inbox_event_once leads with it.
    instance = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="inbox", db_index=False
    )
    name = models.CharField(max_length=200)
    # At most once per instance and event_id (events without an id are all distinct).
    event_id = models.CharField(max_length=255, null=True, blank=True)
    context = models.JSONField(default=dict)
    received_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by_node = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "event_id"], name="inbox_event_once"),
        ]
        indexes = [
            # The wait node: "unconsumed events named X of this instance, oldest first".
            models.Index(
                fields=["instance", "name", "received_at"],
                name="inbox_pending",
                condition=models.Q(consumed_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.event_id or 'no id'})"


class OutboxEvent(models.Model):
    """An event raised by an ``emit`` node: written in the step's outcome transaction,
    processed after commit by the events service (the sweeper retries lost ones)."""

    # No index of its own: outbox_once_per_node leads with it.
    instance = models.ForeignKey(
        "triggers.TriggerInstance", on_delete=models.CASCADE, related_name="outbox", db_index=False
    )
    node_id = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    event_id = models.CharField(max_length=255)
    subjects = models.JSONField(default=list)
    context = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # A retried or redelivered step never emits twice.
            models.UniqueConstraint(fields=["instance", "node_id"], name="outbox_once_per_node"),
        ]
        indexes = [
            # The sweeper: "outbox rows not processed yet, oldest first".
            models.Index(
                fields=["created_at"],
                name="outbox_unprocessed",
                condition=models.Q(processed_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} from {self.node_id}"
