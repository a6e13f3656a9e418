"""The sweeper: what a periodic pass (``notifyflow.sweep``, every few seconds) repairs.

Expired leases are recovered (the step runs again, or the instance fails when its
retries are spent), due instances whose message is lost are dispatched again, waits
held in the database are handed to the broker once due within its horizon, and
emitted events whose after-commit processing was lost are processed, list fan-out
jobs whose worker died are sent again, and the status webhook deliverer is kicked when
a message is due that no deliverer holds (a lost kick, a dead deliverer's lease, a retry
parked beyond the broker horizon).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from notifyflow import metrics
from notifyflow.celery import send_task_on_commit
from status_webhooks import delivery as status_webhooks
from status_webhooks.outbox import DELIVER_TASK
from triggers import fanout, outbox, state
from triggers.dispatch import dispatch_many_on_commit, dispatch_on_commit, queued_messages
from triggers.models import TriggerInstance, TriggerStatus
from workflows.definition import node_by_id
from workflows.models import WorkflowVersion

from .models import StepExecutionLog
from .retry_policy import decide_retry
from .versions import pinned_version

S = TriggerStatus
ACTOR = "sweeper"


def sweep(*, now: datetime | None = None, batch: int | None = None) -> dict[str, int]:
    """Recover expired leases, re-dispatch due instances with no live message, and
    process emitted events whose after-commit processing was lost.

    Every query walks a partial index (status='processing' by locked_until,
    status='enqueued' by available_at, unprocessed outbox rows), so finished rows cost
    nothing.
    """
    now = now or timezone.now()
    batch = batch or settings.NOTIFYFLOW_SWEEP_BATCH
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S)
    return {
        "recovered": recover_expired_leases(now=now, batch=batch),
        "dispatched": redispatch_due(now=now, batch=batch)
        + dispatch_upcoming(now=now, batch=batch),
        "outbox": outbox.outbox_process_pending(older_than=stale, batch=batch),
        "fanouts": fanout.fanouts_expired(now=now, batch=batch),
        "webhooks": status_webhooks_kick(now=now),
    }


def status_webhooks_kick(*, now: datetime) -> int:
    """Start a deliverer pass (1) if a status webhook message is due and unheld, else 0.
    The pass itself runs in a task of its own: a sweep never waits on the network."""
    if not status_webhooks.due_exists(now=now):
        return 0
    send_task_on_commit(DELIVER_TASK)
    metrics.SWEEPER.labels("status_webhooks").inc()
    return 1


def recover_expired_leases(*, now: datetime, batch: int) -> int:
    expired = list(
        TriggerInstance.objects.filter(status=S.PROCESSING, locked_until__lt=now)
        .order_by("locked_until")
        .select_related("workflow_version")
        .only(
            "id",
            "workflow_id",
            "workflow_version__version",
            "current_node_id",
            "attempts",
            "lease_token",
            "locked_by",
            "locked_until",
        )[:batch]
    )
    return sum(_recover(instance, now) for instance in expired)


def _recover(instance: TriggerInstance, now: datetime) -> bool:
    """Requeue (or fail, retries spent) one instance whose lease expired, with a step log
    that says so; False if it moved meanwhile (fenced on the lease)."""
    assert instance.locked_until is not None  # processing rows always hold a lease
    decision = decide_retry(
        attempts_so_far=instance.attempts,
        permanent=False,
        now=now,
        immediate=True,
        policy=_node_retry_policy(instance),
    )
    error = (
        f"node {instance.current_node_id}: lease expired at "
        f"{instance.locked_until.isoformat()} (worker {instance.locked_by} lost)"
    )
    updates = {"attempts": decision.attempts, "last_error": error}
    with transaction.atomic():
        if decision.give_up:
            ok = state.transition(
                instance_id=instance.pk,
                from_status=S.PROCESSING,
                to_status=S.FAILED,
                reason=f"retries exhausted: {error}",
                actor=ACTOR,
                lease_token=instance.lease_token,
                updates=updates,
            )
        else:
            ok = state.requeue(
                instance_id=instance.pk,
                lane=instance.lane,
                lease_token=instance.lease_token,
                due=now,
                now=now,
                actor=ACTOR,
                reason=f"lease recovered: {error}",
                updates=updates,
            )
        if not ok:
            return False
        metrics.SWEEPER.labels("lease").inc()
        if not decision.give_up:
            metrics.RETRIES.labels("sweeper").inc()
        StepExecutionLog.objects.create(
            trigger_id=instance.pk,
            workflow_id=instance.workflow_id,
            workflow_version=instance.workflow_version.version,
            node_id=instance.current_node_id or "",
            node_type="unknown",
            attempt=decision.attempts,
            started_at=instance.locked_until,
            finished_at=now,
            input_context={},
            output={},
            success=False,
            error=error,
            error_kind="lease_expired",
            worker=ACTOR,
        )
    return True


def _node_retry_policy(instance: TriggerInstance) -> dict[str, Any] | None:
    """The ``retry`` config of the instance's current node (versions are cached)."""
    try:
        definition = pinned_version(instance.workflow_version_id).definition
        return node_by_id(definition, instance.current_node_id or "")["config"].get("retry")
    except (KeyError, WorkflowVersion.DoesNotExist):
        return None


def redispatch_due(*, now: datetime, batch: int) -> int:
    """Send a message for due enqueued instances that have none in the broker: never
    dispatched (a long delay held in the database) or dispatched long enough ago that
    the message must be lost (broker flushed or restarted) and not just waiting in a
    deep queue (``lost_messages``)."""
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S)
    # A paused workflow's instances wait for its resume, which dispatches them.
    enqueued = (
        TriggerInstance.objects.filter(status=S.ENQUEUED)
        .exclude(workflow__is_paused=True)
        .order_by("available_at")
    )
    # Two queries, each served by its own partial index, rather than one OR that would
    # read every due row: never dispatched (trigger_enqueued_undispatched), and
    # dispatched but still unclaimed long after it was due (trigger_due_enqueued).
    rows = list(
        enqueued.filter(dispatched_at__isnull=True, available_at__lte=now).values_list(
            "id", "lane"
        )[:batch]
    )
    if len(rows) < batch:
        rows += lost_messages(
            list(
                enqueued.filter(available_at__lte=stale, dispatched_at__lte=stale).values_list(
                    "id", "lane"
                )[: batch - len(rows)]
            ),
            now=now,
        )
    if not rows:
        return 0
    ids = [pk for pk, _ in rows]
    with transaction.atomic():
        TriggerInstance.objects.filter(pk__in=ids, status=S.ENQUEUED).update(dispatched_at=now)
        dispatch_many_on_commit(rows)
    metrics.SWEEPER.labels("redispatch").inc(len(ids))
    return len(ids)


def lost_messages(
    candidates: list[tuple[uuid.UUID, str]], *, now: datetime
) -> list[tuple[uuid.UUID, str]]:
    """Of ``candidates`` (due enqueued instances dispatched long ago, oldest first), those
    whose message cannot all be waiting in their lane's queue.

    A deep backlog holds messages for longer than NOTIFYFLOW_REDISPATCH_AFTER_S; sending
    them again there would only add load while the workers are behind (each copy is one
    more message a worker takes, claims for nothing or runs the step from, and acks:
    bench scenario ``backlog``). So a lane's queue is asked how many messages wait in
    it: with ``queued`` messages and ``waiting`` due instances that were dispatched and
    not yet claimed, at most ``waiting - queued`` messages can be lost, and that many of
    the oldest candidates are sent again. A message a worker holds (prefetched, or a
    countdown it waits on) is no longer in the queue, so its instance still counts as
    possibly lost, as before this rule: a killed worker's held messages must not wait
    for the broker's visibility timeout. A broker that cannot say (the embedded ones)
    leaves every candidate."""
    if not candidates:
        return candidates
    lanes = {lane for _, lane in candidates}
    queued = queued_messages(lanes)
    if queued is None:
        return candidates
    # Served by trigger_due_enqueued (status = 'enqueued', by available_at, INCLUDE
    # lane); reached only when a candidate is NOTIFYFLOW_REDISPATCH_AFTER_S late.
    waiting = dict(
        TriggerInstance.objects.filter(
            status=S.ENQUEUED, available_at__lte=now, lane__in=lanes, dispatched_at__isnull=False
        )
        .exclude(workflow__is_paused=True)
        .values("lane")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("lane", "n")
    )
    room = {lane: max(0, waiting.get(lane, 0) - queued.get(lane, 0)) for lane in lanes}
    lost = []
    for instance_id, lane in candidates:
        if room[lane] > 0:
            room[lane] -= 1
            lost.append((instance_id, lane))
    if len(lost) < len(candidates):
        metrics.SWEEPER.labels("redispatch_held").inc(len(candidates) - len(lost))
    return lost


def dispatch_upcoming(*, now: datetime, batch: int) -> int:
    """Hand the broker, as countdowns, enqueued instances held in the database that are
    now due within the broker horizon (a long delay, a scheduled digest's close): the
    broker's timer then resumes them on time, not at the first sweep after they are
    due, ``batch`` per sweep at most. The rule the engine applies when it parks (a wait
    within the horizon goes to the broker); 10,000 digests due at 09:00 are handed over
    in the minutes before it (issue 43)."""
    until = now + timedelta(seconds=settings.NOTIFYFLOW_BROKER_HORIZON_S)
    rows = list(
        TriggerInstance.objects.filter(
            status=S.ENQUEUED,
            dispatched_at__isnull=True,
            available_at__gt=now,
            available_at__lte=until,
        )
        .exclude(workflow__is_paused=True)
        .order_by("available_at")
        .values_list("id", "lane", "available_at")[:batch]
    )
    if not rows:
        return 0
    with transaction.atomic():
        TriggerInstance.objects.filter(
            pk__in=[pk for pk, _, _ in rows], status=S.ENQUEUED, dispatched_at__isnull=True
        ).update(dispatched_at=now)
        for pk, lane, due in rows:
            dispatch_on_commit(pk, lane=lane, countdown=(due - now).total_seconds())
    metrics.SWEEPER.labels("upcoming").inc(len(rows))
    return len(rows)
