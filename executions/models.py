from __future__ import annotations

import re
from email.utils import parseaddr

from django.db import models

_PHONE_NOISE = re.compile(r"[\s().-]")


def normalize_recipient(value: str) -> str:
    """How a recipient is stored and searched: an email address lowercased, a phone
    number without spaces, dots, dashes or parentheses."""
    value = value.strip()
    if "@" in value:
        if "<" in value:  # "Ada Lovelace <ada@example.com>"
            value = parseaddr(value)[1] or value
        return value.lower()[:320]
    return _PHONE_NOISE.sub("", value)[:320]


class SkipReason(models.TextChoices):
    """Why a node succeeded without sending (skipped is an outcome, not a failure)."""

    PREFERENCE_OPT_OUT = "preference_opt_out", "Opted out (preferences)"
    MISSING_CHANNEL_DATA = "missing_channel_data", "No address for the channel"
    THROTTLED = "throttled", "Throttled"
    EXPIRED = "expired", "Expired"
    BATCHED = "batched", "Batched into another instance"
    UNSUBSCRIBED = "unsubscribed", "Unsubscribed"


class StepExecutionLog(models.Model):
    """One immutable row per executed node attempt."""

    # No index of its own: steplog_trigger_started leads with it (see below).
    trigger = models.ForeignKey(
        "triggers.TriggerInstance",
        on_delete=models.CASCADE,
        related_name="step_logs",
        db_index=False,
    )
    # PROTECT: deleting a workflow must never take its history with it. No index of its
    # own: steplog_workflow_node_success leads with it.
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.PROTECT, related_name="step_logs", db_index=False
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
    # The row of a node that parked the instance at itself - a wait with no event yet,
    # a delay at the end of the workflow - rather than an attempt: the row that resolves
    # it later is the node's step. Not counted as an execution (stats) or an attempt.
    parked = models.BooleanField(
        default=False,
        db_default=False,
        help_text="parked the instance at this node (a wait, a delay at the end); not an attempt",
    )

    # Why a node that succeeded chose not to send (SkipReason); empty otherwise.
    skip_reason = models.CharField(
        max_length=32, blank=True, default="", db_default="", choices=SkipReason.choices
    )

    class Meta:
        ordering = ["started_at", "id"]
        indexes = [
            # GET /step-logs/?skip_reason= and the admin filter: skips are few, so a
            # partial index of them alone, newest first.
            models.Index(
                fields=["skip_reason", "-started_at"],
                name="steplog_skipped",
                condition=~models.Q(skip_reason=""),
            ),
            # GET /triggers/{id}/steps/ and the admin inline: by trigger, oldest first.
            models.Index(fields=["trigger", "started_at"], name="steplog_trigger_started"),
            # GET /step-logs/?node= and the admin filter.
            models.Index(fields=["node_id", "-started_at"], name="steplog_node_started"),
            # GET /workflows/{key}/stats/: executions, successes and failures per node,
            # as an index-only scan of one workflow's entries (executions.selectors).
            # Parking rows are not executions, and never enter it.
            models.Index(
                fields=["workflow", "node_id", "success"],
                name="steplog_workflow_node_success",
                condition=models.Q(parked=False),
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

    Written with the send's outcome (``executions.deliveries``): ``sent`` means the
    provider accepted the message; it is never sent again. ``failed``: the last attempt
    failed. ``sending``: a push or chat step's results so far, written while other
    targets' answers were awaited - if it stays so, the worker died or lost its lease
    before the outcome (the window that stays at-least-once). A single send cut off
    the same way leaves no row until an attempt records one.
    """

    # No index of its own: delivery_unique_instance_node leads with it.
    instance = models.ForeignKey(
        "triggers.TriggerInstance",
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_index=False,
    )
    node_id = models.CharField(max_length=64)
    channel = models.CharField(max_length=16)
    # The rendered recipient (normalized: email lowercased, phone without spaces; the
    # first address when an email has several), so support can find what was sent to
    # whom: see ``normalize_recipient`` and ``instances_sent_to``.
    recipient = models.CharField(max_length=320, blank=True, default="")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    provider_message_id = models.CharField(max_length=255, blank=True, default="")
    output = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # What the provider reported later (webhooks); never moves backwards (TRACKING_RANK).
    tracking_status = models.CharField(max_length=16, blank=True, default="", db_default="")
    tracking_updated_at = models.DateTimeField(null=True, blank=True)
    # A send to several targets (push devices, chat connections): each one's result by
    # target id, ``{provider, target, outcome, message_id?, code?, ...}`` - an accepted
    # one is never sent again (``executions.target_sends``). Null for a single send.
    targets = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "node_id"], name="delivery_unique_instance_node"
            ),
        ]
        indexes = [
            # Status webhooks find their delivery by the provider's message id.
            models.Index(
                fields=["provider_message_id"],
                name="delivery_provider_message_id",
                condition=~models.Q(provider_message_id=""),
            ),
            # Admin search and GET /api/v1/triggers/?recipient=: exact, normalized match.
            models.Index(fields=["recipient"], name="delivery_recipient"),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id}:{self.node_id} {self.status}"


class TrackingStatus(models.TextChoices):
    """What the provider reported after accepting the message (webhooks), ranked: a
    delivery's tracking status only ever moves to a higher rank (``TRACKING_RANK``), so
    repeated and out-of-order webhook calls cannot move it backwards."""

    NONE = "", "-"
    QUEUED = "queued", "Queued"
    SENT = "sent", "Sent"
    DELIVERED = "delivered", "Delivered"
    OPENED = "opened", "Opened"
    CLICKED = "clicked", "Clicked"
    BOUNCED = "bounced", "Bounced"
    FAILED = "failed", "Failed"
    COMPLAINED = "complained", "Complained"


# queued < sent < delivered < opened < clicked < bounced = failed < complained.
# A bounce or failure ends the engagement ladder (an "opened" after a bounce is
# ignored); only a complaint can follow it.
TRACKING_RANK: dict[str, int] = {
    TrackingStatus.NONE: 0,
    TrackingStatus.QUEUED: 1,
    TrackingStatus.SENT: 2,
    TrackingStatus.DELIVERED: 3,
    TrackingStatus.OPENED: 4,
    TrackingStatus.CLICKED: 5,
    TrackingStatus.BOUNCED: 6,
    TrackingStatus.FAILED: 6,
    TrackingStatus.COMPLAINED: 7,
}


class DeliveryAttempt(models.Model):
    """One row per provider call of a delivery (failover tries several per attempt).
    Immutable history, written in the step's outcome transaction."""

    class Outcome(models.TextChoices):
        SENT = "sent", "Sent"
        TRANSIENT = "transient", "Transient error"
        PERMANENT = "permanent", "Permanent error"
        SKIPPED = "skipped", "Skipped (circuit open)"

    # No index of its own: delivery_attempt_delivery leads with it.
    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="attempt_rows", db_index=False
    )
    attempt = models.PositiveIntegerField(help_text="the delivery's attempt number (1 = first)")
    provider = models.CharField(max_length=200)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    latency_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    message_id = models.CharField(max_length=255, blank=True, default="")
    at = models.DateTimeField()

    class Meta:
        ordering = ["delivery_id", "id"]
        indexes = [
            # The delivery's inline and the deliveries API: its attempts, in order.
            models.Index(fields=["delivery", "id"], name="delivery_attempt_delivery"),
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.attempt} {self.provider} {self.outcome}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("delivery attempts are immutable")
        super().save(*args, **kwargs)


class DeliveryEvent(models.Model):
    """A provider's status report (anymail tracking webhook, Twilio status callback),
    kept raw. ``applied`` says whether it moved the delivery's tracking status."""

    # No index of its own: delivery_event_delivery leads with it.
    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    provider = models.CharField(max_length=64)
    status = models.CharField(max_length=16, blank=True, default="")
    provider_event = models.CharField(max_length=64, help_text="the provider's own event type")
    applied = models.BooleanField(default=False)
    occurred_at = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField()
    raw = models.JSONField(default=dict)

    class Meta:
        ordering = ["delivery_id", "id"]
        indexes = [models.Index(fields=["delivery", "id"], name="delivery_event_delivery")]

    def __str__(self) -> str:
        return f"{self.delivery_id} {self.provider} {self.provider_event}"


# More matches than any support question needs; bounds the id list handed to the
# instance query (which then uses the primary key, not a scan by created_at).
RECIPIENT_MATCH_LIMIT = 10_000


def instance_ids_sent_to(recipient: str) -> list:
    """Ids of the instances with a delivery to ``recipient`` (normalized first), via
    the delivery_recipient index; at most RECIPIENT_MATCH_LIMIT of them."""
    return list(
        Delivery.objects.filter(recipient=normalize_recipient(recipient))
        .order_by()
        .values_list("instance_id", flat=True)
        .distinct()[:RECIPIENT_MATCH_LIMIT]
    )


def looks_like_recipient(term: str) -> bool:
    """An email address or a phone number (what admin search treats as a recipient)."""
    term = term.strip()
    return ("@" in term and " " not in term) or bool(re.fullmatch(r"\+?[\d\s().-]{6,}", term))
