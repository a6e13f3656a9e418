"""An instance arriving at a batch node: it joins the open batch of its key,
or opens one. Safe under any number of racing workers without a lock:

- PostgreSQL: the join is one statement (UPDATE the open batch's count RETURNING, then
  INSERT the item from it): the row lock serializes joiners, so every item gets the
  next seq and none is lost or counted twice. If nothing joined, the open is one
  statement too (INSERT the batch ON CONFLICT DO NOTHING on the partial unique index of
  open batches, and the opener's item from it); a lost race loops back to the join.
- SQLite (``make run``): the same through the ORM in a transaction (SQLite serializes
  writers).

``PostgresBatchArrivalStore`` (its statements ``JOIN_BATCH`` and ``OPEN_BATCH``) and
``OrmBatchArrivalStore``; ``ARRIVAL_STORE`` is the one for this database, chosen once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q

from notifyflow import db
from notifyflow.errors import ApplicationError
from notifyflow.ids import uuid7
from status_webhooks import events as status_events
from status_webhooks.outbox import record

from .models import Batch, BatchCloseReason, BatchItem, BatchStatus

_ATTEMPTS = 20


@dataclass(frozen=True)
class Arrival:
    """Where an instance landed: its batch, its place, and the batch as it left it."""

    batch_id: uuid.UUID
    seq: int
    opener: bool
    status: str
    opened_at: datetime
    closes_at: datetime
    # This arrival reached max_items and closed the batch: it does the close's duties.
    filled: bool = False


@dataclass(frozen=True)
class _Key:
    workflow_id: int
    node_id: str
    recipient_id: str | None
    key: str


def arrive(
    *,
    instance_id: uuid.UUID,
    workflow_id: int,
    recipient_id: str | None,
    node_id: str,
    key: str,
    window: timedelta | None = None,
    closes_at: datetime | None = None,
    max_items: int | None,
    now: datetime,
) -> Arrival:
    """Join the open batch of the instance's (workflow, node, recipient, key), or open
    one closing ``window`` after ``now``, or at ``closes_at`` (a ``schedule``'s next
    time: exactly one of the two is given). Idempotent: an instance already in a batch
    of this node (a re-run after a crash) gets its item back, counted once.

    On PostgreSQL a joining arrival - the common case - is one statement: the join
    itself skips an instance already in the open batch, and only when it joined nothing
    is the instance's own item looked for (a re-run) before opening."""
    where = _Key(workflow_id=workflow_id, node_id=node_id, recipient_id=recipient_id, key=key)
    if closes_at is None:
        if window is None:
            raise ValueError("arrive needs a window or closes_at")
        closes_at = now + window
    arrival = ARRIVAL_STORE.arrive(where, instance_id, now, closes_at, max_items)
    if arrival is None:
        raise ApplicationError(
            code="batch_contended",
            field=None,
            message=f"could not join or open a batch at node {node_id} after {_ATTEMPTS} tries",
        )
    return arrival


def existing_arrival(*, instance_id: uuid.UUID, node_id: str) -> Arrival | None:
    """The instance's item in a batch of ``node_id``, if it has one (served by
    batchitem_unique_instance, instance first)."""
    item = (
        BatchItem.objects.filter(instance_id=instance_id, batch__node_id=node_id)
        .select_related("batch")
        .order_by("-batch__opened_at")
        .first()
    )
    if item is None:
        return None
    batch = item.batch
    return Arrival(
        batch_id=batch.pk,
        seq=item.seq,
        opener=batch.opener_id == instance_id,
        status=batch.status,
        opened_at=batch.opened_at,
        closes_at=batch.closes_at,
    )


def report_closed(batch_id: uuid.UUID | str) -> None:
    """Write ``batch.closed`` for a batch just closed, in the closing transaction."""
    report_closed_many([batch_id])


def report_closed_many(batch_ids: list[uuid.UUID] | list[uuid.UUID | str]) -> None:
    """``report_closed`` for many batches: one read, one write."""
    rows = Batch.objects.filter(pk__in=batch_ids).values_list(
        "pk", "workflow__key", "node_id", "recipient_id", "item_count", "opened_at", "closed_at"
    )
    events = [
        status_events.batch_closed(
            batch_id=batch_id,
            workflow_key=workflow_key,
            node_id=node_id,
            recipient_id=recipient_id,
            count=count,
            opened_at=opened_at,
            closed_at=closed_at,
        )
        for batch_id, workflow_key, node_id, recipient_id, count, opened_at, closed_at in rows
    ]
    record(events=events)


# --- the stores ----------------------------------------------------------------------


class BatchArrivalStore(Protocol):
    def arrive(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival | None:
        """The instance's arrival at the open batch of ``where`` (joined, opened, or
        its item of a re-run); None when racing arrivals won every one of
        ``_ATTEMPTS`` tries."""
        ...


_BATCH, _ITEM = Batch._meta.db_table, BatchItem._meta.db_table

# The join: the open batch's count moves (closing it when it reaches ``max_items``)
# unless the instance already has an item of this node, and the item takes the new
# count as its seq. Parameters: now, workflow, node, recipient ('' for none), key,
# node, instance (the re-run test), instance, now (the item).
JOIN_BATCH = f"""
        WITH b AS (
            UPDATE {_BATCH} SET
                item_count = item_count + 1,
                status = CASE WHEN max_items IS NOT NULL AND item_count + 1 >= max_items
                              THEN 'closed' ELSE status END,
                closed_at = CASE WHEN max_items IS NOT NULL AND item_count + 1 >= max_items
                                 THEN %s ELSE closed_at END,
                close_reason = CASE WHEN max_items IS NOT NULL AND item_count + 1 >= max_items
                                    THEN 'max_items' ELSE close_reason END
            WHERE workflow_id = %s AND node_id = %s
              AND COALESCE(recipient_id, '') = %s AND key = %s
              AND status = 'open' AND (max_items IS NULL OR item_count < max_items)
              AND NOT EXISTS (SELECT 1 FROM {_ITEM} AS mine JOIN {_BATCH} AS its
                                ON its.id = mine.batch_id AND its.node_id = %s
                              WHERE mine.instance_id = %s)
            RETURNING id, item_count, status, opened_at, closes_at
        ), i AS (
            INSERT INTO {_ITEM} (batch_id, instance_id, seq, joined_at)
            SELECT id, %s, item_count, %s FROM b
        )
        SELECT id, item_count, status, opened_at, closes_at FROM b
    """

# The open: a new batch unless one of its key is open (the partial unique index of open
# batches), with the opener's item (seq 1); returns its id, nothing if one was open.
OPEN_BATCH = f"""
        WITH b AS (
            INSERT INTO {_BATCH} (id, workflow_id, node_id, recipient_id, key, status,
                                 opener_id, opened_at, closes_at, closed_at, max_items,
                                 item_count)
            VALUES (%(id)s, %(workflow)s, %(node)s, %(recipient)s, %(key)s, 'open',
                    %(instance)s, %(now)s, %(closes)s, NULL, %(max)s, 1)
            ON CONFLICT DO NOTHING
            RETURNING id
        ), i AS (
            INSERT INTO {_ITEM} (batch_id, instance_id, seq, joined_at)
            SELECT id, %(instance)s, 1, %(now)s FROM b
        )
        SELECT id FROM b
    """


class PostgresBatchArrivalStore(BatchArrivalStore):
    """The join one statement (the common case); if nothing joined, the instance's own
    item (a re-run) or the open, one statement."""

    def arrive(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival | None:
        for _ in range(_ATTEMPTS):
            arrival = self._join_reporting(where, instance_id, now, max_items)
            if arrival is None:
                arrival = existing_arrival(
                    instance_id=instance_id, node_id=where.node_id
                ) or self._open(where, instance_id, now, closes_at, max_items)
            if arrival is not None:
                return arrival
        return None

    def _join_reporting(
        self, where: _Key, instance_id: uuid.UUID, now: datetime, max_items: int | None
    ) -> Arrival | None:
        """``_join``; a join that may fill the batch (``max_items``) closes it, so it
        runs in a transaction with the close's ``batch.closed`` event. A batch without
        ``max_items`` closes only in ``batches.close``: its join stays one statement."""
        if max_items is None:
            return self._join(where, instance_id, now)
        with transaction.atomic():
            arrival = self._join(where, instance_id, now)
            if arrival is not None and arrival.filled:
                report_closed(arrival.batch_id)
        return arrival

    def _join(self, where: _Key, instance_id: uuid.UUID, now: datetime) -> Arrival | None:
        # A prepared statement (``notifyflow.db.execute``): planning this CTE each time
        # was a visible share of an arrival's cost (bench/scenarios/gates.py). Its plan
        # is the partial unique index of open batches and the item's (instance, batch)
        # index whatever the values, so a generic plan is the same plan.
        params = [
            now,
            where.workflow_id,
            where.node_id,
            where.recipient_id or "",
            where.key,
            where.node_id,
            instance_id,
            instance_id,
            now,
        ]
        with connection.cursor() as cursor:
            row = db.execute(cursor, JOIN_BATCH, params).fetchone()
        if row is None:
            return None
        batch_id, seq, status, opened_at, closes_at = row
        return Arrival(
            batch_id=batch_id,
            seq=seq,
            opener=False,
            status=status,
            opened_at=opened_at,
            closes_at=closes_at,
            filled=status == BatchStatus.CLOSED,
        )

    def _open(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival | None:
        params: dict[str, Any] = {
            "id": uuid7(),
            "workflow": where.workflow_id,
            "node": where.node_id,
            "recipient": where.recipient_id,
            "key": where.key,
            "instance": instance_id,
            "now": now,
            "closes": closes_at,
            "max": max_items,
        }
        with connection.cursor() as cursor:
            cursor.execute(OPEN_BATCH, params)
            row = cursor.fetchone()
        if row is None:  # another arrival opened it first: join that one
            return None
        return Arrival(
            batch_id=row[0],
            seq=1,
            opener=True,
            status=BatchStatus.OPEN,
            opened_at=now,
            closes_at=closes_at,
        )


class OrmBatchArrivalStore(BatchArrivalStore):
    """The instance's own item (a re-run) first; then the join or the open through the
    ORM in one transaction (SQLite serializes writers)."""

    def arrive(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival | None:
        found = existing_arrival(instance_id=instance_id, node_id=where.node_id)
        if found is not None:
            return found
        for _ in range(_ATTEMPTS):
            arrival = self._arrive(where, instance_id, now, closes_at, max_items)
            if arrival is not None:
                return arrival
        return None

    def _arrive(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival | None:
        recipient = (
            Q(recipient_id=where.recipient_id)
            if where.recipient_id is not None
            else Q(recipient__isnull=True)
        )
        try:
            with transaction.atomic():
                batch = (
                    Batch.objects.select_for_update()
                    .filter(
                        recipient,
                        workflow_id=where.workflow_id,
                        node_id=where.node_id,
                        key=where.key,
                        status=BatchStatus.OPEN,
                    )
                    .filter(Q(max_items__isnull=True) | Q(item_count__lt=F("max_items")))
                    .first()
                )
                if batch is None:
                    return self._open(where, instance_id, now, closes_at, max_items)
                seq = batch.item_count + 1
                filled = batch.max_items is not None and seq >= batch.max_items
                batch.item_count = seq
                fields = ["item_count"]
                if filled:
                    batch.status, batch.closed_at = BatchStatus.CLOSED, now
                    batch.close_reason = BatchCloseReason.MAX_ITEMS
                    fields += ["status", "closed_at", "close_reason"]
                batch.save(update_fields=fields)
                BatchItem.objects.create(
                    batch=batch, instance_id=instance_id, seq=seq, joined_at=now
                )
                if filled:
                    report_closed(batch.pk)
        except IntegrityError:  # a racing open took the key: try again
            return None
        return Arrival(
            batch_id=batch.pk,
            seq=seq,
            opener=False,
            status=batch.status,
            opened_at=batch.opened_at,
            closes_at=batch.closes_at,
            filled=filled,
        )

    def _open(
        self,
        where: _Key,
        instance_id: uuid.UUID,
        now: datetime,
        closes_at: datetime,
        max_items: int | None,
    ) -> Arrival:
        batch = Batch.objects.create(
            workflow_id=where.workflow_id,
            node_id=where.node_id,
            recipient_id=where.recipient_id,
            key=where.key,
            opener_id=instance_id,
            opened_at=now,
            closes_at=closes_at,
            max_items=max_items,
            item_count=1,
        )
        BatchItem.objects.create(batch=batch, instance_id=instance_id, seq=1, joined_at=now)
        return Arrival(
            batch_id=batch.pk,
            seq=1,
            opener=True,
            status=BatchStatus.OPEN,
            opened_at=now,
            closes_at=batch.closes_at,
        )


ARRIVAL_STORE: BatchArrivalStore = db.per_database(
    postgres=PostgresBatchArrivalStore, other=OrmBatchArrivalStore
)
