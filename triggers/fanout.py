"""List fan-out as a job: a trigger's ``{list: key}`` entries become one
instance per member, created by a worker in set-based batches, resumably.

- ``fanout_start`` (in the request's transaction): one FanOut row per (workflow, key);
  the job is sent after commit, by name, on the ``notifyflow.default`` queue
  (CELERY_TASK_ROUTES says why not bulk).
- ``fanout_run`` (the job): takes the lease (``locked_until``), reads the membership
  ONCE into ``recipient_ids`` (deduplicated across lists, sorted, minus the ids the
  request named itself), then inserts ``NOTIFYFLOW_FANOUT_BATCH`` instances per
  statement (INSERT ... ON CONFLICT DO NOTHING: a resumed batch creates only what is
  missing), advancing
  ``position`` and the counters in the same transaction as each batch (ids made by
  PostgreSQL unless the workflow has interests). Each batch's first steps go, after its
  commit, to a publishing thread (``BackgroundDispatch``) while the next batch is
  written; the job ends once all are sent. Its instances run in the workflow's lane,
  but a ``normal`` workflow's in ``bulk`` (``fanout_lane``). It runs for at
  most ``NOTIFYFLOW_FANOUT_SLICE_S`` and then sends itself again, so no task outlives
  the workers' time limit.
- Erasing a member takes its id out of the snapshot (``fanout_forget``).
- A worker killed mid-job leaves its lease to expire; ``fanouts_expired`` (the sweeper)
  re-sends those jobs. A batch commits only under the lease it read, so a job that lost
  its lease stops.
- Cancel by key (``fanout_cancel``) marks it cancelled: the next batch sees that and
  stops.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from notifyflow.celery import send_task_on_commit
from recipients.models import ListMembership
from workflows.models import Priority, Workflow, WorkflowVersion

from . import state
from .dispatch import BackgroundDispatch
from .models import FanOut, FanOutStatus
from .recipient_rows import recipient_rows

logger = logging.getLogger("notifyflow.triggers")

# The job's task (executions.tasks), sent by name: nothing below executions imports it.
FANOUT_TASK = "notifyflow.fanout_run"


def fanout_start(
    *,
    workflow: Workflow,
    version: WorkflowVersion,
    idempotency_key: str,
    payload: dict[str, Any],
    lists: list[str],
    excluded: Sequence[str],
    created_by_key: str,
    actor: str,
) -> tuple[FanOut, bool]:
    """The fan-out of (workflow, key): created (and its job sent after commit) or the
    existing one (a repeated request; its lists are the first request's)."""
    existing = FanOut.objects.filter(workflow=workflow, idempotency_key=idempotency_key).first()
    if existing is not None:
        return existing, False
    fanout = FanOut(
        workflow=workflow,
        workflow_version=version,
        idempotency_key=idempotency_key,
        payload=payload,
        lists=sorted(lists),
        excluded=sorted(set(excluded)),
        expected=members_count(lists, excluded),
        created_by_key=created_by_key[:100],
        actor=actor[:200],
    )
    try:
        with transaction.atomic():
            fanout.save(force_insert=True)
    except IntegrityError:
        # A concurrent identical request took the key first (committed: the unique
        # index made this INSERT wait for it).
        return FanOut.objects.get(workflow=workflow, idempotency_key=idempotency_key), False
    send_task_on_commit(FANOUT_TASK, str(fanout.pk))
    return fanout, True


def members_count(lists: Sequence[str], excluded: Sequence[str]) -> int:
    """Distinct members of ``lists`` not in ``excluded`` (the answer's ``expected``; the
    job sets it again from its snapshot)."""
    members = ListMembership.objects.filter(list__key__in=list(lists))
    if excluded:
        members = members.exclude(recipient_id__in=list(excluded))
    return members.values("recipient_id").distinct().count()


def _members(fanout: FanOut) -> list[str]:
    """The membership, read once: distinct ids of every list, sorted, minus excluded."""
    ids = set(
        ListMembership.objects.filter(list__key__in=fanout.lists)
        .order_by()
        .values_list("recipient_id", flat=True)
    )
    return sorted(ids - set(fanout.excluded or ()))


def _lease(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.NOTIFYFLOW_FANOUT_LEASE_S)


def fanout_lane(priority: str) -> str:
    """The lane of the instances a list fan-out of a ``priority`` workflow creates: a
    ``normal`` workflow's go to ``bulk``, so a 100,000-member newsletter does not queue
    in front of its one-at-a-time triggers; the other lanes were chosen on purpose."""
    return Priority.BULK if priority == Priority.NORMAL else priority


def _acquire(fanout_id: uuid.UUID | str) -> tuple[FanOut, datetime] | None:
    """Take the job's lease if it is running and nobody holds a live one."""
    now = timezone.now()
    lease = _lease(now)
    taken = (
        FanOut.objects.filter(pk=fanout_id, status=FanOutStatus.RUNNING)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(locked_until=lease, updated_at=now)
    )
    if not taken:
        return None
    # The workflow: its lane and its concurrency setting as the batches are created.
    fanout = FanOut.objects.select_related("workflow_version", "workflow").get(pk=fanout_id)
    return fanout, lease


def _fenced(fanout_id: uuid.UUID, lease: datetime) -> str:
    """Lock the fan-out row for this batch: ``running`` if it is still ours, its status
    if it ended (cancelled), ``lost`` if another run took the lease over."""
    row = (
        FanOut.objects.select_for_update()
        .filter(pk=fanout_id)
        .values_list("status", "locked_until")
        .first()
    )
    if row is None:
        return "lost"
    if row[0] != FanOutStatus.RUNNING:
        return str(row[0])
    return FanOutStatus.RUNNING if row[1] == lease else "lost"


def fanout_run(*, fanout_id: uuid.UUID | str, batch: int | None = None) -> str:
    """Run (or resume) a fan-out job; what became of it: ``busy`` (another worker holds
    it, or it is finished), ``done``, ``cancelled``, ``lost`` (lease taken over),
    ``continued`` (slice used up; sent again)."""
    acquired = _acquire(fanout_id)
    if acquired is None:
        return "busy"
    fanout, lease = acquired
    if fanout.recipient_ids is None:
        with transaction.atomic():
            status = _fenced(fanout.pk, lease)
            if status != FanOutStatus.RUNNING:
                return status
            # Read under the fan-out's lock: an erasure takes it before deleting a
            # member (fanout_forget), so the snapshot never names an erased person.
            ids = _members(fanout)
            fanout.recipient_ids = ids
            FanOut.objects.filter(pk=fanout.pk).update(
                recipient_ids=ids, expected=len(ids), updated_at=timezone.now()
            )
    batch = batch or settings.NOTIFYFLOW_FANOUT_BATCH
    deadline = time.monotonic() + settings.NOTIFYFLOW_FANOUT_SLICE_S
    ids = fanout.recipient_ids or []
    position = fanout.position
    # Each batch's first steps are published by a thread while the next batch is
    # written; leaving the block waits until every committed batch's are sent.
    with BackgroundDispatch(lane=fanout_lane(fanout.workflow.priority)) as dispatch:
        while position < len(ids):
            if time.monotonic() > deadline:
                return _continue(fanout.pk, lease)
            outcome, lease = _batch(fanout, lease, ids[position : position + batch], dispatch)
            if outcome != "ok":
                return outcome
            position += min(batch, len(ids) - position)
    return _finish(fanout.pk, lease)


def _batch(
    fanout: FanOut, lease: datetime, chunk: Sequence[str], dispatch: BackgroundDispatch
) -> tuple[str, datetime]:
    """Create the instances of ``chunk`` and advance the fan-out, in one transaction;
    their first steps go to ``dispatch`` once it commits."""
    with transaction.atomic():
        status = _fenced(fanout.pk, lease)
        if status != FanOutStatus.RUNNING:
            return status, lease
        now = timezone.now()
        inserted = _insert(fanout, chunk, now)
        lease = _lease(now)
        FanOut.objects.filter(pk=fanout.pk).update(
            position=F("position") + len(chunk),
            created=F("created") + len(inserted),
            duplicates=F("duplicates") + len(chunk) - len(inserted),
            locked_until=lease,
            updated_at=now,
        )
        dispatch.on_commit(inserted)
    return "ok", lease


def _insert(fanout: FanOut, chunk: Sequence[str], now: datetime) -> list[str]:
    """The instances of ``chunk`` that do not exist yet: their ids. Without interests
    or a concurrency limit the store makes the ids (``state.create_for_recipients``: no
    per-row Python); interests and the concurrency key are rendered per instance
    (``recipient_rows``), so they need ids first."""
    version = fanout.workflow_version
    actor = fanout.actor or "fanout"
    key_template = fanout.workflow.concurrency_key_template
    lane = fanout_lane(fanout.workflow.priority)
    if not version.definition.get("interests") and key_template is None:
        return state.create_for_recipients(
            workflow_id=fanout.workflow_id,
            workflow_version_id=version.pk,
            idempotency_key=fanout.idempotency_key,
            payload=fanout.payload,
            entry_node_id=version.definition["entry_node_id"],
            created_by_key=fanout.created_by_key,
            recipient_ids=chunk,
            now=now,
            actor=actor,
            lane=lane,
        )
    rows = recipient_rows(
        workflow_id=fanout.workflow_id,
        version=version,
        idempotency_key=fanout.idempotency_key,
        payload=fanout.payload,
        recipient_ids=chunk,
        created_by_key=fanout.created_by_key,
        workflow_key=fanout.workflow.key,
        concurrency_key_template=key_template,
        lane=lane,
    )
    inserted = state.create_bulk(rows=rows, now=now, actor=actor)
    return [str(row.id) for row in rows if row.id in inserted]


def _finish(fanout_id: uuid.UUID, lease: datetime) -> str:
    now = timezone.now()
    done = FanOut.objects.filter(
        pk=fanout_id, status=FanOutStatus.RUNNING, locked_until=lease
    ).update(status=FanOutStatus.DONE, finished_at=now, locked_until=None, updated_at=now)
    if done:
        logger.info("fan-out done", extra={"nf": {"fanout": str(fanout_id)}})
    return "done" if done else "lost"


def _continue(fanout_id: uuid.UUID, lease: datetime) -> str:
    """Hand the rest to a new task: release the lease and send the job again."""
    with transaction.atomic():
        released = FanOut.objects.filter(
            pk=fanout_id, status=FanOutStatus.RUNNING, locked_until=lease
        ).update(locked_until=None, updated_at=timezone.now())
        if released:
            send_task_on_commit(FANOUT_TASK, str(fanout_id))
    return "continued" if released else "lost"


def fanouts_expired(*, now: datetime, batch: int) -> int:
    """The sweeper's part: re-send the jobs of running fan-outs whose lease expired (a
    worker died mid-job) or that never started within a lease (their message was
    lost). Each re-send releases the lease and restarts the clock, so a job waiting in
    a busy queue gets one more message per lease period, not one per sweep; a worker
    still running it finds its lease gone at its next batch and stops. Returns how many
    were sent."""
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_FANOUT_LEASE_S)
    with transaction.atomic():
        ids = list(
            FanOut.objects.select_for_update(skip_locked=True)
            .filter(status=FanOutStatus.RUNNING)
            .filter(Q(locked_until__lt=now) | Q(locked_until__isnull=True, updated_at__lt=stale))
            .order_by("locked_until")
            .values_list("pk", flat=True)[:batch]
        )
        if ids:
            FanOut.objects.filter(pk__in=ids).update(locked_until=None, updated_at=now)
        for fanout_id in ids:
            send_task_on_commit(FANOUT_TASK, str(fanout_id))
    return len(ids)


def fanout_cancel(*, workflow: Workflow, idempotency_key: str) -> FanOut | None:
    """Mark the key's running fan-out cancelled (its job stops before its next batch;
    a batch in flight commits first: the row lock orders them). The fan-out, or None."""
    with transaction.atomic():
        fanout = (
            FanOut.objects.select_for_update()
            .filter(workflow=workflow, idempotency_key=idempotency_key)
            .first()
        )
        if fanout is not None and fanout.status == FanOutStatus.RUNNING:
            now = timezone.now()
            fanout.status = FanOutStatus.CANCELLED
            fanout.finished_at = now
            fanout.locked_until = None
            fanout.save(update_fields=["status", "finished_at", "locked_until", "updated_at"])
    return fanout
