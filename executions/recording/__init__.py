"""Recording a step: one interface, one implementation per database, chosen once.

``StepRecorder.claim`` claims an instance with what its step needs;
``StepRecorder.record`` writes everything the step's end changes - the delivery's
outcome, the step log, the fenced transition (``advance``), a consumed event or an
emitted one - atomically. ``postgres`` does each in one statement; ``orm`` (SQLite,
``make run``) through the ORM in one transaction. Tests marked ``both_databases`` run
on both.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Protocol

from django.db import connection

from .base import Claimed, Outcome, StepRecord

__all__ = ["Claimed", "Outcome", "StepRecord", "StepRecorder", "recorder"]


class StepRecorder(Protocol):
    def claim(self, *, instance_id: uuid.UUID | str, worker: str, now: datetime) -> Claimed | None:
        """Claim an enqueued, due instance (``triggers.state.claim``); None if not
        claimable."""
        ...

    def record(self, rec: StepRecord) -> bool:
        """Write the step's end; True if its fenced transition applied."""
        ...


@functools.cache
def recorder() -> StepRecorder:
    """The recorder for the default database (one per process)."""
    if connection.vendor == "postgresql":
        from . import postgres

        return postgres
    from . import orm

    return orm
