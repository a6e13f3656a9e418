"""Handing instances to the broker. The database decides what is due; this only sends."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.conf import settings

from notifyflow.celery import send_task_on_commit, send_tasks_on_commit

# The task that runs one step (executions.tasks); sent by name so nothing below the
# executions layer imports it.
EXECUTE_NODE_TASK = "notifyflow.execute_node"


def dispatch_on_commit(instance_id: uuid.UUID | str, *, countdown: float | None = None) -> None:
    """Send ``execute_node(instance_id)`` after commit, ``countdown`` seconds later.

    Callers never pass a countdown beyond NOTIFYFLOW_BROKER_HORIZON_S: longer waits stay
    in the database and the sweeper dispatches them when due.
    """
    if countdown is not None and countdown <= 0:
        countdown = None
    if countdown is not None and countdown > settings.NOTIFYFLOW_BROKER_HORIZON_S:
        raise ValueError(f"countdown {countdown}s is beyond the broker horizon")
    send_task_on_commit(EXECUTE_NODE_TASK, str(instance_id), countdown=countdown)


def dispatch_many_on_commit(instance_ids: Iterable[uuid.UUID | str]) -> None:
    """``dispatch_on_commit`` (no countdown) for many instances: one pipelined publish."""
    send_tasks_on_commit(EXECUTE_NODE_TASK, [(str(instance_id),) for instance_id in instance_ids])
