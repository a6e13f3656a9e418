"""What the machine hands to a store: a fenced change of one instance, the statements
that ride with it, a claim's join, and a new instance's row (plus the ``InstanceStore``
protocol both stores implement). Plain data: the stores and the machine import it, it
imports neither.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from status_webhooks.outbox import NewEvent

from ..models import TriggerInstance, TriggerStatus

if TYPE_CHECKING:
    from workflows.models import Workflow

# Creation is audited too, as none -> enqueued (``from_status`` empty).
CREATED = ("", TriggerStatus.ENQUEUED)


@dataclass(frozen=True)
class Change:
    """One fenced write of an instance: the row must still match ``conditions``; it
    then takes ``values``, and ``audit`` is its TriggerStatusChange row - written only
    if ``audited``: the routine claim and release of one step are not (the
    step log is their record; the timeline merges both)."""

    conditions: dict[str, Any]
    values: dict[str, Any]
    audit: dict[str, Any]
    audited: bool = True


@dataclass(frozen=True)
class Statement:
    """A data-modifying SQL statement run inside a transition's statement (PostgreSQL).
    It may test ``state.APPLIED`` (whether the fenced transition applied)."""

    sql: str
    params: list[Any] = field(default_factory=list)
    # The CTE's name when another statement reads its rows (default ``also_<n>``).
    name: str = ""


@dataclass(frozen=True)
class Join:
    """Columns of another table read in the claim's statement (PostgreSQL): ``clause``
    joins on ``state.CLAIMED`` (the claimed row); ``columns`` are select expressions
    with aliases, which become attributes of the claimed instance. Hashable: the
    claim's statement is built once per join."""

    clause: str
    columns: tuple[str, ...]


# A status event written with a transition, and when: "" - iff the transition applies;
# else SQL that holds in the transition's statement (PostgreSQL), whatever it does.
Reported = tuple[NewEvent, str]


class InstanceStore(Protocol):
    """Where the machine's writes go: ``postgres.PostgresInstanceStore`` (one statement
    each) or ``orm.OrmInstanceStore``; ``store.STATE_STORE`` is the one in use."""

    def transition(
        self,
        change: Change,
        also: Sequence[Statement],
        durable: bool,
        events: Sequence[Reported] = (),
    ) -> bool:
        """The fenced change, its audit row (if audited), ``also`` and ``events``,
        atomically (``durable``: synchronously committed); True if it applied."""
        ...

    def claim(self, change: Change, join: Join | None) -> TriggerInstance | None:
        """The fenced claim, of an unpaused workflow's instance its concurrency limit
        admits (with ``join``'s columns); the claimed row, or None."""
        ...

    def insert_many(self, rows: Sequence[NewInstance], now: datetime, actor: str) -> set[uuid.UUID]:
        """The new instances with their audit and interest rows; the ids inserted (a
        row whose key is taken is skipped)."""
        ...

    def insert_for_recipients(
        self, row: NewInstance, recipient_ids: Sequence[str], now: datetime, actor: str
    ) -> list[str]:
        """``row`` once per recipient, each with an id of its own; the ids inserted."""
        ...

    def insert_or_find(
        self, row: NewInstance, now: datetime, actor: str, workflow: Workflow
    ) -> tuple[bool, TriggerInstance | None]:
        """``(True, None)`` if ``row`` was inserted, else ``(False, the instance that
        holds its key)`` (None if that one went meanwhile)."""
        ...


@dataclass(frozen=True)
class NewInstance:
    """One instance for ``create_bulk``: what differs between the instances of a batch
    (everything else is the same for all: enqueued at the entry node, due now)."""

    id: uuid.UUID
    workflow_id: int
    workflow_version_id: int
    idempotency_key: str
    payload: dict[str, Any]
    entry_node_id: str
    interests: Sequence[str] = ()
    # The API key that created it (scoped keys read only their own instances).
    created_by_key: str = ""
    # The person it is for: unique per (recipient, workflow, key) then.
    recipient_id: str | None = None
    # Its rendered concurrency key; None when its workflow has no limit.
    concurrency_key: str | None = None
    # Its priority lane: the workflow's priority, or bulk for a normal workflow's list
    # fan-out (``lane_for``).
    lane: str = "normal"


def as_model(row: NewInstance, now: datetime) -> TriggerInstance:
    """``row`` as the model instance ``create_bulk`` inserts for it (unsaved)."""
    return TriggerInstance(
        id=row.id,
        workflow_id=row.workflow_id,
        workflow_version_id=row.workflow_version_id,
        idempotency_key=row.idempotency_key,
        payload=row.payload,
        status=TriggerStatus.ENQUEUED,
        current_node_id=row.entry_node_id,
        vars={},
        attempts=0,
        available_at=now,
        dispatched_at=now,
        created_at=now,
        updated_at=now,
        created_by_key=row.created_by_key[:100],
        recipient_id=row.recipient_id,
        concurrency_key=row.concurrency_key,
        lane=row.lane,
    )
