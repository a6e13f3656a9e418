"""Every write of a trigger instance's state, in one place.

- ``machine``: the transition table and the operations built on ``transition()`` -
  ``claim``, ``requeue``, ``cancel`` (and ``cancel_many``), ``retry``, ``run_now``.
- ``parking``: instances parked at a gate: ``wake_parked``,
  ``complete_parked`` (a closed batch's members).
- ``creation``: ``create_or_find`` (a POST) and ``create_bulk``.
- ``shapes``: the data handed to a store (a change, a statement, a new row).
- ``store``: where the writes go, ``STATE_STORE`` (an ``InstanceStore``), chosen once
  per process: ``postgres.PostgresInstanceStore`` (named statements, one round trip
  each) or ``orm.OrmInstanceStore`` (SQLite, ``make run``).

Callers import the package: ``from triggers import state``.
"""

from .creation import create_bulk, create_for_recipients, create_or_find
from .machine import (
    ALLOWED_TRANSITIONS,
    IllegalTransition,
    cancel,
    cancel_many,
    check_transition,
    claim,
    instances_cancelled,
    requeue,
    retry,
    run_now,
    transition,
)
from .parking import complete_parked, wake_parked
from .postgres import APPLIED, CLAIMED
from .shapes import CREATED, Join, NewInstance, Statement, as_model

__all__ = [
    "ALLOWED_TRANSITIONS",
    "APPLIED",
    "CLAIMED",
    "CREATED",
    "IllegalTransition",
    "Join",
    "NewInstance",
    "Statement",
    "as_model",
    "cancel",
    "cancel_many",
    "check_transition",
    "claim",
    "complete_parked",
    "create_bulk",
    "create_for_recipients",
    "create_or_find",
    "instances_cancelled",
    "requeue",
    "retry",
    "run_now",
    "transition",
    "wake_parked",
]
