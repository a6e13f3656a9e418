"""An instance's status history, complete: its audit rows merged with the status
changes its step logs record.

The rule: the routine claim and release of one step (enqueued -> processing -> enqueued
as the step advances) write no audit row; the step's log row is their record (claim
and release times, worker, outcome). Every other change - creation, retries scheduled,
parks, completion, failure, cancellation, operator actions, lease recovery - keeps its
``TriggerStatusChange`` row. ``status_history`` puts the two back together, in order,
so the timeline (API and admin) lists every change, as it did when each was a row.

Rows written before that change (claims and releases with their own audit rows) merge
the same way: a step log adds no change the audit rows already hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange

from .models import StepExecutionLog

S = TriggerStatus

# Where a change comes from: an audit row, or a step log (a routine claim or release).
AUDIT = "audit"
STEP_LOG = "step_log"

# A lease recovery's step log names the lost worker in its error (executions.sweeper).
_LOST_WORKER = re.compile(r"\(worker (.*) lost\)")


@dataclass(frozen=True)
class StatusChangeEntry:
    """One status change, whichever record holds it (the fields of an audit row)."""

    from_status: str
    to_status: str
    reason: str
    actor: str
    at: datetime
    details: dict[str, Any] | None = None
    source: str = AUDIT


# The step-log columns the merge reads.
HISTORY_STEP_FIELDS = (
    "started_at",
    "finished_at",
    "success",
    "parked",
    "error_kind",
    "error",
    "worker",
    "node_id",
)

# Sort ranks at equal times: a step's release before the audit row that may be its
# end instead, audit rows before a claim.
_RELEASE, _AUDIT_ROW, _CLAIM = 0, 1, 2


def status_history(
    *,
    instance: TriggerInstance,
    changes: Sequence[TriggerStatusChange],
    steps: Sequence[StepExecutionLog],
) -> list[StatusChangeEntry]:
    """Every status change of ``instance``, oldest first: ``changes`` (its audit rows)
    and the claims and routine releases its ``steps`` (its step logs) record - and the
    claim of a step running now, which has no log yet (from the instance's lease).

    Walked in time order with the status it implies: a step's claim is a change only
    while the instance is enqueued (an older audited claim holds it otherwise); its
    release only when the step succeeded, was recorded, and no audit row from
    ``processing`` (completion, a park, a cancellation, a lease recovery) ends it
    before the next claim.
    """
    items: list[tuple[datetime, int, int, Any]] = [
        (change.at, _AUDIT_ROW, n, change) for n, change in enumerate(changes)
    ]
    for n, log in enumerate(steps):
        items.append((_claimed_at(log), _CLAIM, n, log))
        if log.success and not log.parked and not log.error_kind:
            items.append((log.finished_at, _RELEASE, n, log))
    items.sort(key=lambda item: item[:3])
    history: list[StatusChangeEntry] = []
    # Before its creation row an instance has no status; one without (made by hand)
    # starts enqueued, as every instance does.
    created = any(not change.from_status for change in changes)
    status: str = "" if created else S.ENQUEUED
    for index, (at, kind, n, row) in enumerate(items):
        entry: StatusChangeEntry | None
        if kind == _AUDIT_ROW:
            entry = _from_audit(row)
        elif kind == _CLAIM:
            entry = _claim(row, at) if status == S.ENQUEUED else None
        else:
            entry = _release(row, steps, n) if _released(status, items, index) else None
        if entry is not None:
            history.append(entry)
            status = entry.to_status
    if instance.status == S.PROCESSING and status == S.ENQUEUED:
        history.append(_running(instance))
    return history


def _running(instance: TriggerInstance) -> StatusChangeEntry:
    """The claim of the step running now: the claim took a lease of LEASE_S."""
    assert instance.locked_until is not None  # a processing row holds a lease (CHECK)
    return StatusChangeEntry(
        from_status=S.ENQUEUED,
        to_status=S.PROCESSING,
        reason="claimed",
        actor=instance.locked_by or "engine",
        at=instance.locked_until - timedelta(seconds=settings.NOTIFYFLOW_LEASE_S),
        source=STEP_LOG,
    )


def _claimed_at(log: StepExecutionLog) -> datetime:
    """When the step's claim happened: the log's start; for a lease recovery's log
    (whose worker was lost before it wrote one) the start of the lost lease."""
    if log.error_kind == "lease_expired":
        return log.started_at - timedelta(seconds=settings.NOTIFYFLOW_LEASE_S)
    return log.started_at


def _released(status: str, items: Sequence[tuple[Any, ...]], index: int) -> bool:
    """Whether a step's routine release is a change: the instance is processing and
    the next audit row or claim is not an audit row out of processing (that row is the
    step's end)."""
    if status != S.PROCESSING:
        return False
    for _, kind, _, row in items[index + 1 :]:
        if kind == _AUDIT_ROW:
            return row.from_status != S.PROCESSING
        if kind == _CLAIM:
            return True
    return True


def _from_audit(change: TriggerStatusChange) -> StatusChangeEntry:
    return StatusChangeEntry(
        from_status=change.from_status,
        to_status=change.to_status,
        reason=change.reason,
        actor=change.actor,
        at=change.at,
        details=change.details,
    )


def _claim(log: StepExecutionLog, at: datetime) -> StatusChangeEntry:
    if log.error_kind == "lease_expired":
        lost = _LOST_WORKER.search(log.error)
        return StatusChangeEntry(
            from_status=S.ENQUEUED,
            to_status=S.PROCESSING,
            reason="claimed (the worker was lost; the time its lease began)",
            actor=lost.group(1) if lost else "",
            at=at,
            source=STEP_LOG,
        )
    return StatusChangeEntry(
        from_status=S.ENQUEUED,
        to_status=S.PROCESSING,
        reason="claimed",
        actor=log.worker or "engine",
        at=at,
        source=STEP_LOG,
    )


def _release(log: StepExecutionLog, steps: Sequence[StepExecutionLog], n: int) -> StatusChangeEntry:
    # The next node is the next step's (a definition is acyclic: the cursor moves on).
    following = steps[n + 1].node_id if n + 1 < len(steps) else None
    reason = f"node {log.node_id} done" + (f"; next {following}" if following else "")
    return StatusChangeEntry(
        from_status=S.PROCESSING,
        to_status=S.ENQUEUED,
        reason=reason,
        actor="engine",
        at=log.finished_at,
        source=STEP_LOG,
    )
