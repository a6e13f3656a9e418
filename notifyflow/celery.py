"""The Celery app, and the one way the project enqueues work: after commit, ids only."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_init
from django.db import transaction
from kombu.exceptions import OperationalError as KombuOperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifyflow.settings")

logger = logging.getLogger("notifyflow.celery")

app = Celery("notifyflow")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes every DB connection after every task unless this is
# set (costs ~4x in steps/s, shared/PERF-NOTES.md). It is read as a raw key.
app.conf.CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000000"))
app.conf.worker_disable_rate_limits = True
app.autodiscover_tasks()


def enqueue_on_commit(task: Any, *args: Any, countdown: float | None = None) -> None:
    """Send ``task`` with ``args`` (ids only) once the surrounding transaction commits.

    Outside a transaction Django runs the callback at once. A message sent before commit
    could be consumed by a worker that cannot see the row yet.

    If the broker stays unreachable through the publish retries
    (CELERY_TASK_PUBLISH_RETRY_POLICY), the failure is logged and swallowed: the row is
    committed with its ``dispatched_at``, so the sweeper re-sends the message once that
    is NOTIFYFLOW_REDISPATCH_AFTER_S old. An API call answers as if it had been sent.
    """
    def send() -> None:
        try:
            task.apply_async(args=args, countdown=countdown)
        except KombuOperationalError as exc:
            logger.warning("broker unavailable, %s%s left for the sweeper: %s", task.name,
                           args, exc)

    transaction.on_commit(send)


@worker_init.connect
def _worker_async_commit(**kwargs: Any) -> None:
    """Workers commit asynchronously by default; the engine turns synchronous commit
    back on for the one statement that must survive a PostgreSQL crash (a step's
    outcome). What may be lost in such a crash is only ever safe to lose: a claim (the
    sweeper recovers the lease), a delivery's 'sending' marker (the documented
    at-least-once window), a sweeper pass (it runs again)."""
    from django.conf import settings
    from django.db.backends.signals import connection_created

    if settings.IS_POSTGRES and settings.NOTIFYFLOW_WORKER_ASYNC_COMMIT:
        connection_created.connect(_set_async_commit, weak=False)


def _set_async_commit(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")


@worker_init.connect
def _worker_health(**kwargs: Any) -> None:
    """Drop dead database connections between tasks (CELERY_DB_REUSE_MAX above keeps
    them, so Celery no longer does)."""
    from executions import worker_health

    worker_health.install()


@worker_init.connect
def _fix_kombu_timers(**kwargs: Any) -> None:
    from django.conf import settings

    if settings.NOTIFYFLOW_KOMBU_TIMER_FIX:
        from executions.kombu_timers import apply_kombu_timer_fix

        if apply_kombu_timer_fix():
            logger.warning(
                "kombu timer fix applied (NOTIFYFLOW_KOMBU_TIMER_FIX)")


@app.on_after_finalize.connect
def _connect_beat_init(sender: Celery, **kwargs: Any) -> None:
    from celery.signals import beat_init

    def ensure_schedule(**_: Any) -> None:
        from executions.schedule import ensure_sweeper_schedule

        ensure_sweeper_schedule()

    beat_init.connect(ensure_schedule, weak=False)
