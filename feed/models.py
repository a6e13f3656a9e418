"""The in-app feed: one row per item an ``in_app`` node wrote, and one counter
row per recipient that ``GET /feed/counts/`` reads by primary key.

Counts exclude archived items (as Knock's feeds do): an archived item is neither unread
nor unseen, and unarchiving it counts it again. The counter is moved by the statement
that changes the items (``feed.services``), never recomputed with ``COUNT(*)``.
"""

from __future__ import annotations

from django.db import models

from notifyflow.ids import uuid7


class FeedItem(models.Model):
    # uuid7: time-ordered, so the newest-first index stays append-mostly.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of its own: feed_recipient_newest leads with it. CASCADE: the feed is the
    # person's (erasure deletes it explicitly first, in one set-based statement).
    recipient = models.ForeignKey(
        "recipients.Recipient", on_delete=models.CASCADE, related_name="feed_items", db_index=False
    )
    # PROTECT, as the step logs: a workflow with history is never deleted. No index: a
    # workflow's deletion is refused before this check (its instances' logs protect it).
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # SET_NULL: purging a finished instance keeps the person's feed. No index of its
    # own: feed_unique_instance_node leads with it (the purge's SET NULL finds rows by it).
    instance = models.ForeignKey(
        "triggers.TriggerInstance",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    node_id = models.CharField(max_length=64)
    title = models.TextField()
    body = models.TextField(blank=True, default="")
    url = models.TextField(blank=True, default="")
    category = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    seen_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "executions_feeditem"  # the table it has had since the executions app
        verbose_name = "feed item"
        ordering = ["-created_at", "-id"]
        constraints = [
            # One item per (instance, node): the ON CONFLICT target of the node's write,
            # so a re-run step (a worker killed after the write) writes nothing twice.
            models.UniqueConstraint(
                fields=["instance", "node_id"], name="feed_unique_instance_node"
            ),
        ]
        indexes = [
            # GET /feed/?archived=include|exclude|only (a page of one recipient, newest
            # first, keyset on created_at), bulk "all", erasure, the console's feed.
            models.Index(fields=["recipient", "-created_at", "-id"], name="feed_recipient_newest"),
            # GET /feed/?status=unread (archived excluded): only the unread items.
            models.Index(
                fields=["recipient", "-created_at", "-id"],
                name="feed_recipient_unread",
                condition=models.Q(read_at__isnull=True, archived_at__isnull=True),
            ),
            # GET /feed/?status=unseen (archived excluded): only the unseen items.
            models.Index(
                fields=["recipient", "-created_at", "-id"],
                name="feed_recipient_unseen",
                condition=models.Q(seen_at__isnull=True, archived_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id}: {self.title[:60]}"

    @property
    def is_unread(self) -> bool:
        return self.read_at is None and self.archived_at is None

    @property
    def is_unseen(self) -> bool:
        return self.seen_at is None and self.archived_at is None


class FeedCounter(models.Model):
    """A recipient's unread and unseen counts (archived items excluded), created with
    the recipient's first item. ``version`` goes up with every change of the feed: the
    counts' ETag carries it, so a poll notices a feed that changed at equal counts."""

    recipient = models.OneToOneField(
        "recipients.Recipient",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="feed_counter",
    )
    unread_count = models.BigIntegerField(default=0)
    unseen_count = models.BigIntegerField(default=0)
    version = models.BigIntegerField(default=0)

    class Meta:
        db_table = "executions_feedcounter"  # the table it has had since the executions app
        verbose_name = "feed counter"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(unread_count__gte=0, unseen_count__gte=0),
                name="feed_counter_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id}: {self.unread_count} unread, {self.unseen_count} unseen"
