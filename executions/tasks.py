"""Celery tasks: thin, stable names, ids only. The engine does the work."""

from __future__ import annotations

import logging

from celery import shared_task

from notifyflow import db
from triggers import fanout, inbox

from . import engine, sweeper, worker_health

logger = logging.getLogger("notifyflow.tasks")

# A step that lost its database connection is tried again after 1, 2, 4, ... 30 s: about
# five minutes in all, which covers a restart or a failover. If the database is away for
# longer the message is dropped and the sweeper re-sends the step once it is back (the
# instance is still enqueued, or its lease expires).
DB_RETRY_MAX = 14
DB_RETRY_MAX_COUNTDOWN_S = 30


@shared_task(
    name="notifyflow.execute_node",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=DB_RETRY_MAX,
)
def execute_node(self, instance_id: str) -> str:
    """Execute the current node of one trigger instance (no-op if not claimable)."""
    try:
        return engine.step_execute(
            instance_id=instance_id,
            task_id=self.request.id or "",
            worker=self.request.hostname or "",
        )
    except db.DATABASE_LOST as exc:
        # The claim and the outcome are fenced on status and lease, so running the step
        # again records nothing twice: it claims, or finds the step done, or finds it
        # leased by the attempt that died (then the sweeper recovers that lease).
        worker_health.close_dead_connections()
        countdown = min(DB_RETRY_MAX_COUNTDOWN_S, 2**self.request.retries)
        logger.warning(
            "step %s: database unavailable (%s); retry in %ss", instance_id, exc, countdown
        )
        raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="notifyflow.wake_waiting", ignore_result=True)
def wake_waiting(instance_ids: list[str], event: str) -> int:
    """Part of a large delivery: make the instances waiting for ``event`` due and send
    their messages (triggers.inbox sends these instead of holding the request)."""
    return inbox.wake_waiting(instance_ids=instance_ids, event=event)


@shared_task(
    name="notifyflow.fanout_run",
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
)
def fanout_run(fanout_id: str) -> str:
    """Expand a trigger's lists into instances (triggers.fanout), on the bulk queue; a
    job runs for NOTIFYFLOW_FANOUT_SLICE_S (under the time limits), then sends itself
    again."""
    try:
        return fanout.fanout_run(fanout_id=fanout_id)
    except db.DATABASE_LOST as exc:
        # The lease runs out and the sweeper sends the job again.
        worker_health.close_dead_connections()
        logger.warning("fan-out %s: database unavailable (%s)", fanout_id, exc)
        return "database_lost"


@shared_task(name="notifyflow.purge_finished", ignore_result=True)
def purge_finished() -> dict:
    """Periodic when NOTIFYFLOW_PURGE_AFTER_DAYS > 0: delete old finished instances."""
    from datetime import timedelta

    from django.conf import settings

    from triggers.retention import finished_purge

    return finished_purge(older_than=timedelta(days=settings.NOTIFYFLOW_PURGE_AFTER_DAYS))


@shared_task(name="notifyflow.sweep", ignore_result=True)
def sweep() -> dict:
    """Periodic: re-dispatch due instances whose message was lost; recover dead leases."""
    try:
        found = sweeper.sweep()
    except db.DATABASE_LOST as exc:
        # Beat sends the next sweep in a few seconds; that one finds a fresh connection.
        worker_health.close_dead_connections()
        logger.warning("sweep skipped: database unavailable (%s)", exc)
        return {}
    # Quiet unless it found work (Celery's own lines about it are at DEBUG: LOGGING).
    summary = ", ".join(f"{what} {count}" for what, count in found.items() if count)
    if summary:
        logger.info("sweep found work: %s", summary)
    else:
        logger.debug("sweep: nothing to do")
    return found
