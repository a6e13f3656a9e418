"""Where the state machine's writes go: PostgreSQL statements or the ORM, chosen once.

The machine (``machine``, ``creation``) decides *what* changes - the fenced conditions,
the new values, the audit row - and hands that to a store that writes it: ``postgres``
as single statements (one round trip each), ``orm`` through Django's ORM in one
transaction (SQLite, ``make run``). Both pass the same tests (pytest marker
``both_databases``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from django.db import connection

if TYPE_CHECKING:
    from workflows.models import Workflow

    from ..models import TriggerInstance
    from .creation import NewInstance


@dataclass(frozen=True)
class Change:
    """One fenced write of an instance: the row must still match ``conditions``; it
    then takes ``values``, and ``audit`` is its TriggerStatusChange row."""

    conditions: dict[str, Any]
    values: dict[str, Any]
    audit: dict[str, Any]


@dataclass(frozen=True)
class Statement:
    """A data-modifying SQL statement run inside a transition's statement (PostgreSQL).
    It may test ``state.APPLIED`` (whether the fenced transition applied)."""

    sql: str
    params: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Join:
    """Columns of another table read in the claim's statement (PostgreSQL): ``clause``
    joins on ``state.CLAIMED`` (the claimed row); ``columns`` are select expressions
    with aliases, which become attributes of the claimed instance."""

    clause: str
    columns: Sequence[str]


class Store(Protocol):
    def transition(self, change: Change, also: Sequence[Statement], durable: bool) -> bool: ...

    def claim(self, change: Change, join: Join | None) -> TriggerInstance | None: ...

    def insert_many(
        self, rows: Sequence[NewInstance], now: datetime, actor: str
    ) -> set[uuid.UUID]: ...

    def insert_or_find(
        self, row: NewInstance, now: datetime, actor: str, workflow: Workflow
    ) -> tuple[bool, TriggerInstance | None]: ...


@functools.cache
def store() -> Store:
    """The store for the default database (one per process)."""
    if connection.vendor == "postgresql":
        from . import postgres

        return postgres
    from . import orm

    return orm
