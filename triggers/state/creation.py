"""Creating instances: ``create_or_find`` for a POST, ``create_bulk`` for up to 1,000,
``create_for_recipients`` for a fan-out's batch.

Each new instance is written with its creation audit row (none -> enqueued) and its
interest rows, atomically: an event posted the moment the call returns reaches it. A
taken (workflow, idempotency_key) inserts nothing and raises nothing; the caller
answers with the existing row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workflows.models import Workflow

from ..models import TriggerInstance
from .shapes import NewInstance
from .store import STATE_STORE


def create_bulk(*, rows: Sequence[NewInstance], now: datetime, actor: str) -> set[uuid.UUID]:
    """INSERT many new instances, each enqueued at its entry node and due ``now``, with
    its creation audit row and interest rows, skipping any whose (workflow,
    idempotency_key) is taken. Returns the ids actually inserted; the others lost to a
    row that exists or to a concurrent writer (the INSERT waited for its transaction).
    Rows go in in (workflow, key) order, so concurrent calls with overlapping keys wait
    on each other in one order and never deadlock.

    On PostgreSQL one statement whatever the number of rows (``postgres_creation.instance_insert``);
    elsewhere the ORM, one savepoint per instance inside one transaction.
    """
    if not rows:
        return set()
    return STATE_STORE.insert_many(rows, now, actor)


def create_for_recipients(
    *,
    workflow_id: int,
    workflow_version_id: int,
    idempotency_key: str,
    payload: dict[str, Any],
    entry_node_id: str,
    created_by_key: str,
    recipient_ids: Sequence[str],
    now: datetime,
    actor: str,
    lane: str,
) -> list[str]:
    """``create_bulk`` of one instance per recipient of one trigger (a fan-out's batch),
    without interests, the ids made by the store (on PostgreSQL in the statement:
    nothing per row in Python but the recipient id). Returns the ids of the instances
    actually inserted, as text; a recipient that has an instance of (workflow, key)
    gets none."""
    if not recipient_ids:
        return []
    row = NewInstance(
        id=uuid.UUID(int=0),  # made per row by the store
        workflow_id=workflow_id,
        workflow_version_id=workflow_version_id,
        idempotency_key=idempotency_key,
        payload=payload,
        entry_node_id=entry_node_id,
        created_by_key=created_by_key,
        lane=lane,
    )
    return STATE_STORE.insert_for_recipients(row, recipient_ids, now, actor)


def create_or_find(
    *, row: NewInstance, now: datetime, actor: str, workflow: Workflow
) -> tuple[bool, TriggerInstance | None]:
    """``create_bulk`` for one row, which also reads the instance that holds its key if
    that is taken: ``(True, None)`` inserted; ``(False, instance)`` the key's instance
    (``workflow`` and its version attached); ``(False, None)`` taken by a writer that
    committed while this ran (read it again).

    On PostgreSQL one statement: a POST of a new key or of a repeated one is one round
    trip (``postgres_creation.instance_insert``).
    """
    return STATE_STORE.insert_or_find(row, now, actor, workflow)
