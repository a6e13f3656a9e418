"""Recording a step: one interface, one implementation per database, chosen once.

``RECORDER.claim`` claims an instance with what its step needs; ``RECORDER.record``
writes everything the step's end changes - the delivery's outcome, the step log, the
fenced transition (``advance``), a consumed event or an emitted one - atomically.
``postgres.PostgresStepRecorder`` does each in one statement (its module lays the
statement out); ``orm.OrmStepRecorder`` (SQLite, ``make run``) through the ORM in one
transaction. Tests marked ``both_databases`` run on both.
"""

from __future__ import annotations

from notifyflow import db

from .base import Claimed, Outcome, StepRecord, StepRecorder
from .orm import OrmStepRecorder
from .postgres import PostgresStepRecorder

__all__ = ["RECORDER", "Claimed", "Outcome", "StepRecord", "StepRecorder"]


RECORDER: StepRecorder = db.per_database(postgres=PostgresStepRecorder, other=OrmStepRecorder)
