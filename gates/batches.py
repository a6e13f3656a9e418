"""Batches (docs/workflows.md#batch; Knock's batch, Novu's digest): the open/join of an arrival
(``batch_arrival.arrive``), the close (at the window's end, by the ``max_items``
filler, or flushed over the API or the admin), the digest the opener continues with,
the cancel of a batch whose opener was cancelled, and the reads of the API and admin.

Members park in their batch (``parked_on = "batch"``) so one cancelled before the close
is left out; the closer completes the still-parked members set-based and wakes the
opener, which continues with the digest."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from notifyflow import db
from notifyflow.errors import ConflictError, NotFoundError
from triggers import state
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus

from .batch_arrival import Arrival, arrive, existing_arrival, report_closed, report_closed_many
from .models import Batch, BatchCloseReason, BatchItem, BatchStatus

__all__ = [
    "Arrival",
    "after_park",
    "arrive",
    "batch_items",
    "batch_or_404",
    "batches",
    "close",
    "close_due",
    "digest",
    "existing_arrival",
    "flush",
    "on_instances_cancelled",
]

DIGEST_ITEMS = 100
# Batches ``close_due`` closes per transaction.
CLOSE_DUE_CHUNK = 2000
_STATUS_SQL = f'SELECT "status" FROM "{Batch._meta.db_table}" WHERE "id" = %s'


def close(
    *,
    batch_id: uuid.UUID,
    now: datetime,
    actor: str,
    reason: BatchCloseReason = BatchCloseReason.WINDOW,
) -> Batch:
    """open -> closed (idempotent), recording ``reason`` and ``actor`` (how and by whom:
    the batch page shows them), then the close's duties, also for a batch already
    closed (a filler that crashed before doing them): its members still parked in it
    complete (``batched``), and the opener is woken to continue with the digest. A
    cancelled batch is returned as it is. The close and its ``batch.closed`` status event
    are one transaction. (The ``max_items`` filler closes in its join's statement,
    ``batch_arrival``, recording ``max_items``: closing it here again changes nothing.)"""
    with transaction.atomic():
        if Batch.objects.filter(pk=batch_id, status=BatchStatus.OPEN).update(
            status=BatchStatus.CLOSED, closed_at=now, close_reason=reason, closed_by=actor
        ):
            report_closed(batch_id)
    batch = batch_or_404(batch_id)
    if batch.status == BatchStatus.CLOSED:
        _close_duties(batch, actor)
    return batch


def close_due(*, workflow_id: int, node_id: str, now: datetime, actor: str) -> int:
    """Close every open batch of this node due by ``now``, set-based, ``CLOSE_DUE_CHUNK``
    per transaction (each with its ``batch.closed`` events); how many it closed. Scheduled
    digests come due together (10,000 at 09:00): the first opener to run closes them all
    at the time instead of each waiting for its own step. Each opener still does its
    close's duties (``close``, idempotent) when its step runs. Racing callers split the
    work (SKIP LOCKED); the open batches of a workflow are found by batch_workflow_status."""
    closed = 0
    while True:
        with transaction.atomic():
            ids = list(
                Batch.objects.select_for_update(skip_locked=True)
                .filter(
                    workflow_id=workflow_id,
                    node_id=node_id,
                    status=BatchStatus.OPEN,
                    closes_at__lte=now,
                )
                .values_list("pk", flat=True)[:CLOSE_DUE_CHUNK]
            )
            if ids:
                Batch.objects.filter(pk__in=ids, status=BatchStatus.OPEN).update(
                    status=BatchStatus.CLOSED,
                    closed_at=now,
                    close_reason=BatchCloseReason.WINDOW,
                    closed_by=actor,
                )
                report_closed_many(ids)
        closed += len(ids)
        if len(ids) < CLOSE_DUE_CHUNK:
            return closed


def _close_duties(batch: Batch, actor: str) -> None:
    members = list(
        BatchItem.objects.filter(batch_id=batch.pk)
        .exclude(instance_id=batch.opener_id)
        .values_list("instance_id", flat=True)
    )
    if members:
        state.complete_parked(
            instance_ids=members,
            node_id=batch.node_id,
            reason=f"batched into batch {batch.pk}",
            actor=actor,
        )
    state.wake_parked(instance_ids=[batch.opener_id], parked_on=ParkedOn.BATCH)


def after_park(*, instance_id: uuid.UUID, batch_id: uuid.UUID | str) -> None:
    """After an arrival's park committed: a batch closed meanwhile (a flush or the
    ``max_items`` filler between the arrival's join and its park) found the instance
    still running, so neither completed nor woke it; do that now rather than at the
    window's end. One primary-key read when the batch is still open (the common case)."""
    with connection.cursor() as cursor:  # prepared: one per arrival (bench: gates)
        key = Batch._meta.pk.get_db_prep_value(uuid.UUID(str(batch_id)), connection)
        row = db.execute(cursor, _STATUS_SQL, [key]).fetchone()
    if row is None or row[0] != BatchStatus.CLOSED:
        return
    batch = Batch.objects.get(pk=batch_id)
    if batch.opener_id == instance_id:
        state.wake_parked(instance_ids=[instance_id], parked_on=ParkedOn.BATCH)
    else:
        state.complete_parked(
            instance_ids=[instance_id],
            node_id=batch.node_id,
            reason=f"batched into batch {batch.pk}",
            actor="engine",
        )


def flush(*, batch_id: uuid.UUID, actor: str) -> Batch:
    """Close an open batch now (the API's flush, the admin's "Flush now"): its opener
    continues with the digest at once. ConflictError ``not_open`` otherwise."""
    batch = batch_or_404(batch_id)
    if batch.status != BatchStatus.OPEN:
        raise ConflictError(
            code="not_open",
            field=None,
            message=f"batch {batch.pk} is {batch.status}, not open",
        )
    return close(batch_id=batch.pk, now=timezone.now(), actor=actor, reason=BatchCloseReason.FLUSH)


def digest(batch: Batch) -> dict[str, Any]:
    """What the opener continues with (``vars.batch_<node id>``): the members' payloads
    whole, in arrival order (the first DIGEST_ITEMS), the first and the last, and the
    count - members cancelled before the close left out."""
    kept = BatchItem.objects.filter(batch_id=batch.pk).exclude(
        instance__status=TriggerStatus.CANCELLED
    )
    payloads = kept.order_by("seq").values_list("instance__payload", flat=True)
    items = list(payloads[:DIGEST_ITEMS])
    if len(items) < DIGEST_ITEMS:
        count, last = len(items), (items[-1] if items else None)
    else:  # more than shown: count them all, and read the last one
        count = kept.count()
        last = kept.order_by("-seq").values_list("instance__payload", flat=True).first()
    return {
        "batch_id": str(batch.pk),
        "count": count,
        "items": items,
        "first": items[0] if items else None,
        "last": last,
        "opened_at": batch.opened_at.isoformat(),
        "closed_at": batch.closed_at.isoformat() if batch.closed_at else None,
    }


def on_instances_cancelled(*, instance_ids: Sequence[uuid.UUID | str], **kwargs: Any) -> None:
    """Receiver of ``state.instances_cancelled``: an open batch whose opener was
    cancelled is cancelled, and its members still parked in it are cancelled too."""
    now = timezone.now()
    for batch in Batch.objects.filter(opener_id__in=list(instance_ids), status=BatchStatus.OPEN):
        cancelled = Batch.objects.filter(pk=batch.pk, status=BatchStatus.OPEN).update(
            status=BatchStatus.CANCELLED,
            closed_at=now,
            close_reason=BatchCloseReason.OPENER_CANCELLED,
            closed_by="engine",
        )
        if not cancelled:
            continue
        members = list(
            TriggerInstance.objects.filter(
                pk__in=BatchItem.objects.filter(batch_id=batch.pk).values("instance_id"),
                status=TriggerStatus.ENQUEUED,
                parked_on=ParkedOn.BATCH,
                current_node_id=batch.node_id,
            ).values_list("pk", flat=True)
        )
        if members:
            state.cancel_many(
                instance_ids=members,
                reason=f"batch {batch.pk} cancelled: its opener was cancelled",
                actor="engine",
            )


def batch_or_404(batch_id: uuid.UUID | str) -> Batch:
    batch = Batch.objects.select_related("workflow").filter(pk=batch_id).first()
    if batch is None:
        raise NotFoundError(code="not_found", field=None, message="no such batch")
    return batch


def batches(
    *,
    workflow_key: str | None = None,
    recipient_id: str | None = None,
    status: str | None = None,
) -> QuerySet[Batch]:
    """Batches newest first, filtered (batch_workflow_status, batch_recipient,
    batch_status_opened serve the filters)."""
    queryset = Batch.objects.select_related("workflow")
    if workflow_key is not None:
        queryset = queryset.filter(workflow__key=workflow_key)
    if recipient_id is not None:
        queryset = queryset.filter(recipient_id=recipient_id)
    if status is not None:
        queryset = queryset.filter(status=status)
    return queryset


def batch_items(*, batch_id: uuid.UUID) -> QuerySet[BatchItem]:
    """A batch's items in arrival order with their instance's status (batchitem_unique_seq)."""
    return (
        BatchItem.objects.filter(batch_id=batch_id)
        .select_related("instance")
        .only("id", "seq", "joined_at", "instance_id", "batch_id", "instance__status")
        .order_by("seq")
    )
