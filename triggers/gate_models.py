"""Gate tables (SPEC §13): the keyed state the gate nodes keep in PostgreSQL (never only
in Redis), each gate in a section of its own."""

from __future__ import annotations

from django.db import models

# --- Throttles -----------------------------------------------------------------------


class ThrottleScope(models.TextChoices):
    """What a throttle counts: one node of one workflow, or one recipient across every
    workflow's throttle nodes with the same key."""

    WORKFLOW = "workflow", "Workflow (this node)"
    RECIPIENT = "recipient", "Recipient (across workflows)"


class ThrottleCounter(models.Model):
    """The hits of one throttle key in its sliding window (``triggers.gates.throttles``).

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
