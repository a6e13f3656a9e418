"""Selector for the operator console's front page: how the queue is doing, right now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q
from django.utils import timezone

from notifyflow.db import table_row_estimate
from triggers.models import TriggerInstance, TriggerStatus

from .support import relative_age

FAILED_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class StatusCount:
    status: str
    label: str
    count: int
    approximate: bool = False


@dataclass(frozen=True)
class ConsoleOverview:
    now: datetime
    status_counts: list[StatusCount]
    failed_last_hour: int
    backlog: int
    oldest_backlog_at: datetime | None
    waiting: int = 0
    next_wake_up_at: datetime | None = None

    @property
    def total(self) -> int:
        return sum(row.count for row in self.status_counts)

    @property
    def failed_since(self) -> datetime:
        return self.now - FAILED_WINDOW

    @property
    def next_wake_up_in(self) -> timedelta | None:
        if self.next_wake_up_at is None:
            return None
        return max(timedelta(0), self.next_wake_up_at - self.now)

    @property
    def oldest_backlog_age(self) -> timedelta | None:
        if self.oldest_backlog_at is None:
            return None
        return max(timedelta(0), self.now - self.oldest_backlog_at)


# Above this many rows (planner estimate) the completed count is estimated, not counted.
EXACT_COMPLETED_BELOW = 100_000


def console_overview_get(*, now: datetime | None = None) -> ConsoleOverview:
    """A few cheap queries over trigger instances.

    - enqueued: from the pass over trigger_due_enqueued below (due + not yet due).
    - processing: an index-only count of trigger_lease_processing (partial: every
      processing row). Failed and cancelled: one GROUP BY over the partial index of
      finished rows, trigger_finished_status. These stay small in a healthy queue (no
      index over every status: a step's updates would each write to it).
    - completed: the bulk of a long-lived table. Counting it exactly reads every index
      entry (bench/admin_changelist.py measures it), so on PostgreSQL above
      EXACT_COMPLETED_BELOW rows it is the table's planner estimate (pg_class.reltuples)
      minus the other statuses, flagged ``approximate``; exact otherwise.
    - failed in the last hour: failed instances whose ``finished_at`` is within the
      hour (served by the partial index trigger_failed_finished).
    - waiting: enqueued instances not due yet (delays, backoff, waits) and the next
      wake-up, from the same partial index.
    - backlog: enqueued instances already due (``available_at <= now``) and their oldest
      due time, both from the partial index trigger_due_enqueued.
    """
    now = now or timezone.now()
    S = TriggerStatus
    active = [S.ENQUEUED, S.PROCESSING, S.FAILED, S.CANCELLED]
    # Due and not yet due enqueued instances in one pass over trigger_due_enqueued.
    due, later = Q(available_at__lte=now), Q(available_at__gt=now)
    enqueued = TriggerInstance.objects.filter(status=S.ENQUEUED).aggregate(
        backlog=Count("pk", filter=due),
        oldest=Min("available_at", filter=due),
        waiting=Count("pk", filter=later),
        next=Min("available_at", filter=later),
    )
    counts = dict(
        TriggerInstance.objects.filter(status__in=[S.FAILED, S.CANCELLED])
        .order_by()
        .values_list("status")
        .annotate(n=Count("*"))
    )
    counts[S.ENQUEUED] = enqueued["backlog"] + enqueued["waiting"]
    counts[S.PROCESSING] = TriggerInstance.objects.filter(status=S.PROCESSING).count()
    estimate = table_row_estimate(TriggerInstance)
    others = sum(counts.get(status, 0) for status in active)
    approximate = estimate is not None and estimate >= EXACT_COMPLETED_BELOW
    if approximate:
        counts[S.COMPLETED] = max(0, estimate - others)
    else:
        counts[S.COMPLETED] = TriggerInstance.objects.filter(status=S.COMPLETED).count()
    failed_last_hour = TriggerInstance.objects.filter(
        status=S.FAILED, finished_at__gte=now - FAILED_WINDOW
    ).count()
    return ConsoleOverview(
        now=now,
        waiting=enqueued["waiting"],
        next_wake_up_at=enqueued["next"],
        status_counts=[
            StatusCount(
                value,
                str(label),
                counts.get(value, 0),
                approximate=approximate and value == S.COMPLETED,
            )
            for value, label in S.choices
        ],
        failed_last_hour=failed_last_hour,
        backlog=enqueued["backlog"],
        oldest_backlog_at=enqueued["oldest"],
    )


def format_age(age: timedelta | None) -> str:
    """``2d 3h``, ``4m 05s``, ``12s``; empty for None."""
    if age is None:
        return ""
    return relative_age(age.total_seconds())
