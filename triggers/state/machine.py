"""The state machine: one table of allowed transitions and the operations built on it.

``transition()`` is the only writer of ``status`` and of the audit rows
(``TriggerStatusChange``); the claim, the requeue after a step and the operator actions
(cancel, retry, run now) are built on it. The routine claim and release of one step
(enqueued -> processing -> enqueued as the step advances) write no audit row: the step
log is their record, and the timeline merges both
(``executions.history.status_history``). Updates are fenced: they re-check the status
(and the lease token of the worker that holds the instance), so a stale writer changes
nothing and learns so from the return value.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from status_webhooks import events as status_events
from status_webhooks.outbox import NewEvent, record

from ..dispatch import dispatch_on_commit
from ..models import GATES, ParkedOn, TriggerInstance, TriggerStatus, TriggerStatusChange
from ..stale_messages import sift_after_cancel
from .shapes import Change, Join, Reported, Statement
from .store import STATE_STORE

S = TriggerStatus

# (from, to) -> what it means. Nothing else is allowed.
ALLOWED_TRANSITIONS: dict[tuple[str, str], str] = {
    (S.ENQUEUED, S.PROCESSING): "claimed by a worker",
    (S.PROCESSING, S.ENQUEUED): "step done, delay or retry scheduled, or lease recovered",
    (S.PROCESSING, S.COMPLETED): "no next node",
    (S.ENQUEUED, S.FAILED): "failed before it could run",
    (S.PROCESSING, S.FAILED): "retries exhausted or permanent error",
    # The only way out of failed: an operator's retry (audited with the operator).
    (S.FAILED, S.ENQUEUED): "retried by an operator",
    # Not a change of status, but an operator's intervention worth the audit trail.
    (S.ENQUEUED, S.ENQUEUED): "made due now by an operator",
    # Cancellation (API, admin): a pending delay, retry or wait never runs; a running
    # step finishes and records its delivery, but its fenced outcome cannot advance.
    (S.ENQUEUED, S.CANCELLED): "cancelled while waiting",
    (S.PROCESSING, S.CANCELLED): "cancelled while a step ran",
    # A member parked in a batch ends when its batch closes, set-based.
    (S.ENQUEUED, S.COMPLETED): "batch member completed when its batch closed",
}

# Sent after instances were cancelled, by every way in (``cancel``, ``cancel_many``),
# with ``instance_ids``: what an instance holds elsewhere (a batch it opened) follows.
instances_cancelled = Signal()


class IllegalTransition(Exception):
    """A (from, to) pair outside the table: a programming error, never user input."""


def check_transition(from_status: str, to_status: str) -> None:
    if (from_status, to_status) not in ALLOWED_TRANSITIONS:
        raise IllegalTransition(f"{from_status} -> {to_status} is not an allowed transition")


def transition(
    *,
    instance_id: uuid.UUID | str,
    from_status: str,
    to_status: str,
    reason: str,
    actor: str,
    lease_token: uuid.UUID | None = None,
    where: dict[str, Any] | None = None,
    updates: dict[str, Any] | None = None,
    also: Sequence[Statement] = (),
    details: dict[str, Any] | None = None,
    durable: bool = False,
    events: Sequence[NewEvent] = (),
    guarded_events: Sequence[tuple[NewEvent, str]] = (),
    audited: bool = True,
) -> bool:
    """Move an instance from ``from_status`` to ``to_status`` and write the audit row
    (unless not ``audited``: only a step's routine release, whose step log records it).

    The UPDATE re-checks ``from_status`` (and ``lease_token`` when given, which fences
    out a worker whose lease was recovered) and any extra ``where`` lookups, atomically
    with the audit row. Returns False, writing nothing, when the row no longer matches.
    Raises IllegalTransition for a pair not in ALLOWED_TRANSITIONS.

    ``also`` (PostgreSQL only, ValueError elsewhere): further statements executed in the
    same statement whatever the outcome. ``details`` goes into the audit row (what an
    operator changed).

    ``durable`` (PostgreSQL): the statement's own transaction commits synchronously
    whatever the session's ``synchronous_commit`` (workers default to off), set inside
    the statement so an autocommit call stays one round trip. Inside an outer
    transaction it applies to that transaction's COMMIT.

    ``events``: status events of the instance (for status webhooks) written iff the transition
    applies, in its statement (PostgreSQL) or transaction. A terminal status always
    reports ``instance.<status>``: built here (one read of the instance) unless the
    caller passes it. ``guarded_events`` (PostgreSQL only, like ``also``): events
    written when their SQL guard holds in the statement, whatever the transition does
    (a send recorded by a fenced-out step); they take their sequence numbers first.
    """
    change = plan_change(
        instance_id, from_status, to_status, reason, actor, lease_token, where, updates
    )
    change.audit["details"] = details
    if not audited:
        change = replace(change, audited=False)
    reported: list[Reported] = [*guarded_events, *((event, "") for event in events)]
    if to_status in _FINISHED and not any(e.type == f"instance.{to_status}" for e in events):
        finished = _finished_events([instance_id], to_status, reason)
        reported += [(event, "") for event in finished]
    return STATE_STORE.transition(change, also, durable, reported)


_FINISHED = (S.COMPLETED, S.FAILED, S.CANCELLED)


def _finished_events(
    instance_ids: Sequence[uuid.UUID | str], status: str, reason: str
) -> list[NewEvent]:
    """``instance.<status>`` of each instance (those still there), for a transition
    whose caller did not build it."""
    rows = TriggerInstance.objects.filter(pk__in=list(instance_ids)).values_list(
        "pk", "workflow__key", "idempotency_key", "recipient_id"
    )
    return [finished_event(row, status, reason) for row in rows]


def finished_event(row: Sequence[Any], status: str, reason: str) -> NewEvent:
    """``instance.<status>`` from a (pk, workflow key, idempotency key, recipient id) row."""
    instance_id, workflow_key, idempotency_key, recipient_id = row
    return status_events.instance_finished(
        instance_id=instance_id,
        workflow_key=workflow_key,
        idempotency_key=idempotency_key,
        recipient_id=recipient_id,
        status=status,
        reason=reason,
    )


def claim(
    *, instance_id: uuid.UUID | str, worker: str, now: datetime, join: Join | None = None
) -> TriggerInstance | None:
    """enqueued -> processing for a due instance, under a new lease; None if it is not
    claimable (already claimed, finished, not due yet, or its workflow is paused).

    The conditional UPDATE re-checks status and due time, so any number of workers
    racing on one instance get exactly one winner. On PostgreSQL the claim and the read
    of the row (plus ``join``'s columns) are one statement. No audit row: the step's
    log row records the claim (its start, its worker), or, for a worker lost before
    it wrote one, the sweeper's lease-recovery row.
    """
    change = plan_change(
        instance_id,
        S.ENQUEUED,
        S.PROCESSING,
        "claimed",
        worker or "engine",
        None,
        {"available_at__lte": now},
        {
            "lease_token": uuid.uuid4(),
            "locked_by": worker[:200],
            "locked_until": now + timedelta(seconds=settings.NOTIFYFLOW_LEASE_S),
        },
    )
    return STATE_STORE.claim(replace(change, audited=False), join)


def requeue(
    *,
    instance_id: uuid.UUID | str,
    lane: str,
    lease_token: uuid.UUID | None,
    due: datetime,
    now: datetime,
    reason: str,
    actor: str,
    updates: dict[str, Any],
    also: Sequence[Statement] = (),
    durable: bool = False,
    events: Sequence[NewEvent] = (),
    guarded_events: Sequence[tuple[NewEvent, str]] = (),
    audited: bool = True,
) -> bool:
    """processing -> enqueued, due at ``due``. The message goes to ``lane``'s queue (the
    instance's) after commit, unless ``due`` is beyond the broker horizon: then the
    sweeper sends it. ``audited=False`` for a step's routine release only (its step log
    records it)."""
    countdown = (due - now).total_seconds()
    in_broker = countdown <= settings.NOTIFYFLOW_BROKER_HORIZON_S
    moved = transition(
        instance_id=instance_id,
        from_status=S.PROCESSING,
        to_status=S.ENQUEUED,
        reason=reason,
        actor=actor,
        lease_token=lease_token,
        also=also,
        updates={**updates, "available_at": due, "dispatched_at": now if in_broker else None},
        durable=durable,
        events=events,
        guarded_events=guarded_events,
        audited=audited,
    )
    if moved and in_broker:
        dispatch_on_commit(instance_id, lane=lane, countdown=countdown)
    return moved


def cancel(*, instance_id: uuid.UUID | str, from_status: str, reason: str, actor: str) -> bool:
    """enqueued/processing -> cancelled, cursor cleared. Not fenced on the lease: a step
    running now still finishes and records its delivery, but its outcome - fenced on
    the lease - can no longer advance the instance."""
    cancelled = transition(
        instance_id=instance_id,
        from_status=from_status,
        to_status=S.CANCELLED,
        reason=reason,
        actor=actor,
        updates={"current_node_id": None},
    )
    if cancelled:
        instances_cancelled.send(sender=TriggerInstance, instance_ids=[instance_id])
    return cancelled


def cancel_many(*, instance_ids: Sequence[uuid.UUID], reason: str, actor: str) -> int:
    """``cancel`` for many instances (cancel by key of a fan-out's 100,000), set-based:
    per 1,000 ids and status, lock the rows still in it, update them and write their
    audit rows in one transaction. Returns how many were cancelled."""
    cancelled = 0
    lanes: set[str] = set()
    for start in range(0, len(instance_ids), 1000):
        chunk = instance_ids[start : start + 1000]
        for from_status in (S.ENQUEUED, S.PROCESSING):
            cancelled += _cancel_chunk(chunk, from_status, reason, actor, lanes)
    # Their messages, still queued, go in bulk rather than one step each (stale_messages).
    sift_after_cancel(lanes=lanes, cancelled=cancelled)
    return cancelled


def _cancel_chunk(
    chunk: Sequence[uuid.UUID], from_status: str, reason: str, actor: str, lanes: set[str]
) -> int:
    check_transition(from_status, S.CANCELLED)
    now = timezone.now()
    values: dict[str, Any] = {
        "status": S.CANCELLED,
        "updated_at": now,
        "finished_at": now,
        "current_node_id": None,
    }
    if from_status == S.PROCESSING:
        values.update(lease_token=None, locked_by="", locked_until=None)
    with transaction.atomic():
        rows = list(
            # Locks the instances only (the workflow's key is read, not locked).
            TriggerInstance.objects.select_for_update(of=("self",))
            .order_by("pk")
            .filter(pk__in=chunk, status=from_status)
            .values_list("pk", "workflow__key", "idempotency_key", "recipient_id", "lane")
        )
        if not rows:
            return 0
        ids = [row[0] for row in rows]
        lanes.update(row[4] for row in rows)
        TriggerInstance.objects.filter(pk__in=ids).update(**values)
        TriggerStatusChange.objects.bulk_create(
            TriggerStatusChange(
                instance_id=instance_id,
                from_status=from_status,
                to_status=S.CANCELLED,
                reason=reason[:2000],
                actor=actor[:200],
                at=now,
            )
            for instance_id in ids
        )
        record(events=[finished_event(row[:4], S.CANCELLED, reason) for row in rows], at=now)
    instances_cancelled.send(sender=TriggerInstance, instance_ids=ids)
    return len(ids)


def retry(
    *,
    instance_id: uuid.UUID | str,
    actor: str,
    reason: str = "retried by operator",
    workflow_version_id: int | None = None,
    payload: dict[str, Any] | None = None,
    expect: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    lane: str | None = None,
) -> bool:
    """failed -> enqueued now, attempts reset: the only way out of failed. Its message
    goes to ``lane``'s queue (the instance's; read after the write if not given: a
    lane never changes).

    An operator may pin another version of the workflow (``workflow_version_id``) or
    replace the payload in the same fenced write; ``expect`` are further lookups the
    row must still match (the version or payload the operator saw), ``details`` what
    changed, for the audit row."""
    now = timezone.now()
    updates: dict[str, Any] = {
        "attempts": 0,
        "available_at": now,
        "dispatched_at": now,
        "finished_at": None,
        "last_error": "",
    }
    if workflow_version_id is not None:
        updates["workflow_version_id"] = workflow_version_id
    if payload is not None:
        updates["payload"] = payload
    moved = transition(
        instance_id=instance_id,
        from_status=S.FAILED,
        to_status=S.ENQUEUED,
        reason=reason,
        actor=actor,
        where=expect,
        updates=updates,
        details=details,
    )
    if moved:
        if lane is None:
            lane = TriggerInstance.objects.values_list("lane", flat=True).get(pk=instance_id)
        dispatch_on_commit(instance_id, lane=lane)
    return moved


def run_now(*, instance_id: uuid.UUID | str, actor: str, reason: str = "") -> bool:
    """An enqueued instance waiting for a later time becomes due now: a delay or a
    retry's backoff is skipped, and a node parked at itself - a wait for an event, a
    delay at the end of the workflow - reaches its deadline now, so a wait continues
    along its timed-out path (``received: false``) unless a matching event is already in
    its inbox, and the delay ends the workflow. The audit row says which it skipped
    (and the caller's ``reason``, if any). False, writing nothing, if it is not waiting.

    The write is fenced on what was read (node, attempts, what it is parked on), so a
    step that moved the instance meanwhile is never misdescribed; it reads again then.
    """
    for _ in range(3):
        now = timezone.now()
        row = (
            TriggerInstance.objects.filter(pk=instance_id, status=S.ENQUEUED, available_at__gt=now)
            .values_list(
                "current_node_id",
                "attempts",
                "waiting_for_event",
                "wait_deadline",
                "parked_on",
                "lane",
            )
            .first()
        )
        if row is None:
            return False
        node_id, attempts, event, deadline, parked_on, lane = row
        why = f"run now by operator: {_skipped(node_id, attempts, event, deadline, parked_on)}"
        if reason.strip():
            why += f"; reason: {reason.strip()}"
        updates: dict[str, Any] = {"available_at": now, "dispatched_at": now}
        if deadline is not None:
            updates["wait_deadline"] = now
        if parked_on in GATES:  # the gate lets it through once
            updates["parked_on"] = ParkedOn.OVERRIDE
        where: dict[str, Any] = {
            "available_at__gt": now,
            "current_node_id": node_id,
            "attempts": attempts,
            "wait_deadline__isnull": deadline is None,
            "parked_on": parked_on,
        }
        if event is None:
            where["waiting_for_event__isnull"] = True
        else:
            where["waiting_for_event"] = event
        if transition(
            instance_id=instance_id,
            from_status=S.ENQUEUED,
            to_status=S.ENQUEUED,
            reason=why,
            actor=actor,
            where=where,
            updates=updates,
        ):
            dispatch_on_commit(instance_id, lane=lane)
            return True
    return False


def _skipped(
    node_id: str | None,
    attempts: int,
    event: str | None,
    deadline: datetime | None,
    parked_on: str = "",
) -> str:
    """What running now skips, for the audit row."""
    if parked_on in GATES:
        return f"{ParkedOn(parked_on).label.lower()} at node {node_id} released (runs now)"
    if event is not None:
        return f"wait for event {event!r} at node {node_id} skipped (continues as timed out)"
    if deadline is not None:
        return f"delay at node {node_id} skipped (the end of the workflow)"
    if attempts:
        return f"retry backoff of node {node_id} skipped (retry {attempts})"
    return f"delay before node {node_id} skipped"


def plan_change(
    instance_id: uuid.UUID | str,
    from_status: str,
    to_status: str,
    reason: str,
    actor: str,
    lease_token: uuid.UUID | None,
    where: dict[str, Any] | None,
    updates: dict[str, Any] | None,
) -> Change:
    """The fenced write of a transition (IllegalTransition for a pair outside the
    table): leaving processing drops the lease, a terminal status stamps finished_at."""
    check_transition(from_status, to_status)
    now = timezone.now()
    conditions = {"pk": instance_id, "status": from_status, **(where or {})}
    if lease_token is not None:
        conditions["lease_token"] = lease_token
    values = {"status": to_status, "updated_at": now, **(updates or {})}
    if to_status in (S.COMPLETED, S.FAILED, S.CANCELLED):
        values.setdefault("finished_at", now)
    if from_status == S.PROCESSING and to_status != S.PROCESSING:
        values.update(lease_token=None, locked_by="", locked_until=None)
    audit = {
        "instance_id": instance_id,
        "from_status": from_status,
        "to_status": to_status,
        "reason": reason[:2000],
        "actor": actor[:200],
        "at": now,
    }
    return Change(conditions, values, audit)
