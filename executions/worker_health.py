"""Workers notice a dead database connection and reconnect by themselves.

Workers keep their database connection across tasks (``CELERY_DB_REUSE_MAX``,
notifyflow/celery.py): reconnecting per task costs a multiple of the steps/s
(docs/measurements.md, "Connection reuse"). With reuse on,
Celery's Django fixup no longer calls Django's ``close_if_unusable_or_obsolete()``
between tasks, so once PostgreSQL closed a connection (restart, failover,
``pg_terminate_backend``) every later task of that process failed with "the connection
is closed" until the worker was restarted. These receivers do what Django's request
cycle does around every request, around every task instead.

The cost: ``close_if_unusable_or_obsolete()`` only pings the server (``is_usable()``)
when a statement of the task failed with a non-data error (``errors_occurred``); a
healthy connection costs a few attribute reads. It also drops a connection older than
``CONN_MAX_AGE``, which the fixup never did.

But it also re-arms Django's ``CONN_HEALTH_CHECKS`` ping (``health_check_done =
False``), which would then cost a ``SELECT 1`` round trip before the first query of
every task (docs/measurements.md, "Connection reuse"). So the flag is put back
as it was: the ping would only spare a task that meets a connection killed while idle,
and such a task fails on its first statement and ``executions.tasks`` retries it (after
these receivers dropped the connection).
"""

from __future__ import annotations

from typing import Any

from celery.signals import task_postrun, task_prerun
from django.db import connections


def close_dead_connections(**_: Any) -> None:
    """Drop every connection of this process that failed or outlived CONN_MAX_AGE."""
    for conn in connections.all(initialized_only=True):
        # health_check_done is Django's (4.1+), missing from django-stubs.
        health_check_done = conn.health_check_done  # type: ignore[attr-defined]
        conn.close_if_unusable_or_obsolete()
        if conn.connection is not None:
            # close_if_unusable_or_obsolete() re-arms CONN_HEALTH_CHECKS, which would
            # ping before the next task's first query: a round trip per step for
            # nothing, since a failed statement is caught and the task retried.
            conn.health_check_done = health_check_done or conn.health_check_done  # type: ignore[attr-defined]


def install() -> None:
    """Connect the receivers (once per worker; prefork children inherit them). Like
    Django around a request: before a task, and after it."""
    task_prerun.connect(
        close_dead_connections, weak=False, dispatch_uid="notifyflow.worker_health.prerun"
    )
    task_postrun.connect(
        close_dead_connections, weak=False, dispatch_uid="notifyflow.worker_health.postrun"
    )
