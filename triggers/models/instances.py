from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import models

from notifyflow.ids import short_id, uuid7
from workflows.models import Priority


class TriggerStatus(models.TextChoices):
    ENQUEUED = "enqueued", "Enqueued"
    PROCESSING = "processing", "Processing"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = frozenset(
    {TriggerStatus.COMPLETED, TriggerStatus.FAILED, TriggerStatus.CANCELLED}
)


class ParkedOn(models.TextChoices):
    """What a gate-parked instance waits on: a batch closing, room in a
    throttle, a send window opening. ``override``: an operator's run-now released it, so
    the gate lets it through once."""

    NONE = "", "Nothing"
    BATCH = "batch", "Batch"
    THROTTLE = "throttle", "Throttle"
    SEND_WINDOW = "send_window", "Send window"
    OVERRIDE = "override", "Released by an operator"


GATES = frozenset({ParkedOn.BATCH, ParkedOn.THROTTLE, ParkedOn.SEND_WINDOW})


@dataclass(frozen=True)
class Waiting:
    """What an enqueued instance waits for (``TriggerInstance.waiting_on``)."""

    # "event" (a wait node), "delay", "retry" (a failed step's backoff), or a gate:
    # "batch", "throttle", "send_window".
    kind: str
    # When it runs anyway: the wait's deadline (then it times out), the delay's end, or
    # the retry's time.
    until: datetime
    # The event a wait waits for (kind "event").
    event: str | None = None
    # A delay at the end of the workflow: when it is over the instance completes (the
    # cursor is the delay's node); otherwise the cursor is the node that runs next.
    ends_workflow: bool = False


class TriggerInstance(models.Model):
    # Time-ordered (notifyflow.ids): a step's index writes stay on recent pages.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on the two foreign keys: every UPDATE of a step that
    # changes status writes an entry into every index of the table (no HOT update), and
    # neither served a query. workflow_id leads trigger_unique_workflow_idempotency_key
    # and trigger_workflow_status (they serve "instances of a workflow" and PROTECT's
    # check); no query filters on the version, and versions are never deleted.
    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.PROTECT, related_name="instances", db_index=False
    )
    workflow_version = models.ForeignKey(
        "workflows.WorkflowVersion",
        on_delete=models.PROTECT,
        related_name="instances",
        db_index=False,
    )
    idempotency_key = models.CharField(max_length=255)
    payload = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=TriggerStatus.choices, default=TriggerStatus.ENQUEUED
    )
    # The cursor: the node to execute next; null once the instance has finished.
    current_node_id = models.CharField(max_length=64, null=True, blank=True)
    vars = models.JSONField(default=dict, blank=True)
    # Failures of the current node; reset when the cursor advances.
    attempts = models.PositiveIntegerField(default=0)
    available_at = models.DateTimeField()
    # Lease of the worker that holds a processing instance. Every write that ends a step
    # is fenced on lease_token, so a zombie whose lease was recovered cannot write.
    lease_token = models.UUIDField(null=True, blank=True)
    locked_by = models.CharField(max_length=200, blank=True, default="")
    locked_until = models.DateTimeField(null=True, blank=True)
    # When a task message was last handed to the broker for the current due time; the
    # sweeper re-sends only when that message looks lost.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # Parked at its own node: at a wait, the event it waits for and its deadline (a
    # delivery of that event makes it due at once, triggers.inbox); at a delay that
    # ends the workflow, the delay's end alone (no event).
    waiting_for_event = models.CharField(max_length=200, null=True, blank=True)
    wait_deadline = models.DateTimeField(null=True, blank=True)
    # Parked at a gate (ParkedOn): until wait_deadline, or until the gate opens
    # and wakes it (triggers.state.wake_parked).
    parked_on = models.CharField(
        max_length=16, choices=ParkedOn.choices, blank=True, default="", db_default=""
    )
    # Indexed: the console's instance list and GET /triggers/ (unfiltered, ?workflow=
    # alone, ?status=enqueued, the console's created-date filter), newest first. No
    # other index gives that order; without it a page is a sort of the whole table.
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The name of the API key that created the instance ("" for the admin, an event's
    # emit, or rows older than scoped keys): a `trigger` key reads only its own.
    created_by_key = models.CharField(max_length=100, blank=True, default="")
    # The person this instance notifies; null for a payload-only instance
    # and once the person was erased. No index of its own:
    # trigger_unique_recipient_workflow_key leads with it.
    recipient = models.ForeignKey(
        "recipients.Recipient",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="instances",
        db_index=False,
    )
    # Set when its recipient was erased (recipient is then null): the instance keeps
    # its place under the per-recipient uniqueness instead of taking the payload-only
    # (workflow, idempotency_key) slot.
    recipient_erased = models.BooleanField(default=False, db_default=False)
    # Its priority lane: the workflow's priority when created, but bulk for a list
    # fan-out of a normal workflow. Every message for its steps goes to this lane's queue.
    lane = models.CharField(
        max_length=8, choices=Priority.choices, default=Priority.NORMAL, db_default="normal"
    )
    # The workflow's concurrency key as rendered for this instance when it was created;
    # null when its workflow had no concurrency limit then.
    concurrency_key = models.CharField(max_length=255, null=True, blank=True)
    # A console or API test send (triggers.services.test_sends): it runs for real, is
    # shown as a test and left out of the workflow's stats (which subtract the few test
    # rows, found through the partial index trigger_test_workflow_status).
    is_test = models.BooleanField(default=False, db_default=False)
    # A test send's explicit locale (docs/workflows.md, translations): when set, every
    # render of this instance uses it, over the recipient's and a push device's own
    # locale. Null for every other instance.
    locale = models.CharField(max_length=35, null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A payload-only instance: one per (workflow, idempotency_key).
            models.UniqueConstraint(
                fields=["workflow", "idempotency_key"],
                name="trigger_unique_workflow_idempotency_key",
                condition=models.Q(recipient__isnull=True, recipient_erased=False),
            ),
            # One instance per recipient of a request. Recipient first, so it
            # also serves "instances of a recipient" (GET /triggers/?recipient=, the
            # admin, erasure).
            models.UniqueConstraint(
                fields=["recipient", "workflow", "idempotency_key"],
                name="trigger_unique_recipient_workflow_key",
                condition=models.Q(recipient__isnull=False),
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=TriggerStatus.values), name="trigger_status_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(idempotency_key=""), name="trigger_idempotency_key_not_empty"
            ),
            models.CheckConstraint(
                condition=models.Q(lane__in=Priority.values), name="trigger_lane_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    status="processing", lease_token__isnull=False, locked_until__isnull=False
                )
                | ~models.Q(status="processing"),
                name="trigger_processing_has_lease",
            ),
        ]
        indexes = [
            # "Due enqueued instances, oldest first" (claim scans, sweeper re-dispatch):
            # partial, so finished rows never enter it however many there are.
            # Lane included so each lane's backlog (/metrics, /readyz) is read from the
            # index alone.
            models.Index(
                fields=["available_at"],
                name="trigger_due_enqueued",
                include=["lane"],
                condition=models.Q(status="enqueued"),
            ),
            # The claim's concurrency check: executing steps of a workflow's
            # instances per key. Only limited instances enter it.
            models.Index(
                fields=["workflow", "concurrency_key"],
                name="trigger_concurrency_running",
                condition=models.Q(status="processing", concurrency_key__isnull=False),
            ),
            # Sweeper: processing instances whose lease has expired. Also every
            # processing row for GET /triggers/?status=processing and the overview.
            models.Index(
                fields=["locked_until"],
                name="trigger_lease_processing",
                condition=models.Q(status="processing"),
            ),
            # GET /triggers/?workflow=&status= and the console's workflow + status
            # filters, newest first; the workflow's stats (counts per status, an
            # index-only scan); PROTECT's "any instance of this workflow?".
            models.Index(
                fields=["workflow", "status", "-created_at"], name="trigger_workflow_status"
            ),
            # GET /triggers/?status=completed|failed|cancelled and the console's status
            # filter, newest first; the overview's failed and cancelled counts. Finished
            # rows only: a step's claim and outcome change status (no HOT update), so an
            # index over every status took an entry per update; this one takes one per
            # instance, when it finishes. Enqueued and processing instances are listed
            # through trigger_due_enqueued / trigger_lease_processing (both hold every
            # row of their status) or the created_at index.
            models.Index(
                fields=["status", "-created_at"],
                name="trigger_finished_status",
                condition=models.Q(status__in=sorted(TERMINAL_STATUSES)),
            ),
            # GET /triggers/?idempotency_key= without a workflow, the console's search
            # by key, cancel by key of a people trigger (every recipient's instance of
            # (workflow, key): the unique indexes lead with the workflow for
            # payload-only rows, with the recipient for the others) and erasure's
            # instances sharing a key. Costs an entry per step update (bench/RESULTS.md).
            models.Index(fields=["idempotency_key"], name="trigger_idempotency_key"),
            # Sweeper: due instances that were never handed to the broker (long delays).
            models.Index(
                fields=["available_at"],
                name="trigger_enqueued_undispatched",
                condition=models.Q(status="enqueued", dispatched_at__isnull=True),
            ),
            # Admin overview: "failures in the last hour".
            models.Index(
                fields=["finished_at"],
                name="trigger_failed_finished",
                condition=models.Q(status="failed"),
            ),
            # Retention (triggers.retention.finished_purge): finished instances, oldest
            # finish first; without it each batch of the purge was a scan of the table.
            # One entry per instance, written when it finishes.
            models.Index(
                fields=["finished_at"],
                name="trigger_finished_at",
                condition=models.Q(status__in=sorted(TERMINAL_STATUSES)),
            ),
            # Workflow stats: the test sends to subtract per status (few rows), so the
            # main count stays an index-only scan of trigger_workflow_status.
            models.Index(
                fields=["workflow", "status"],
                name="trigger_test_workflow_status",
                condition=models.Q(is_test=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.idempotency_key} ({short_id(self.pk)})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def waiting_on(self, now: datetime) -> Waiting | None:
        """What this instance waits for before its next step runs, if it waits for
        anything: an event (until its deadline), a delay, or a retry's backoff. None if
        it is due, running or finished."""
        if self.status != TriggerStatus.ENQUEUED:
            return None
        if self.waiting_for_event:
            return Waiting("event", self.wait_deadline or self.available_at, self.waiting_for_event)
        if self.parked_on in GATES:
            return Waiting(self.parked_on, self.wait_deadline or self.available_at, None)
        if self.available_at <= now:
            return None
        if self.wait_deadline is not None:  # a delay at the end, parked at its own node
            return Waiting("delay", self.wait_deadline, None, ends_workflow=True)
        if self.attempts:
            return Waiting("retry", self.available_at, None)
        return Waiting("delay", self.available_at, None)


class TriggerStatusChange(models.Model):
    """Append-only audit of every status change of a trigger instance."""

    # No index of its own: status_change_instance_at leads with it.
    instance = models.ForeignKey(
        TriggerInstance, on_delete=models.CASCADE, related_name="status_changes", db_index=False
    )
    # Empty for the creation (none -> enqueued).
    from_status = models.CharField(max_length=16, choices=TriggerStatus.choices, blank=True)
    to_status = models.CharField(max_length=16, choices=TriggerStatus.choices)
    reason = models.TextField(blank=True, default="")
    actor = models.CharField(max_length=200, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)
    # What an operator changed with the transition, e.g. {"old_payload", "new_payload"}
    # or {"old_version", "new_version"}; null for everything else.
    details = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["instance", "at"], name="status_change_instance_at")]

    def __str__(self) -> str:
        return f"{self.from_status} -> {self.to_status}"
