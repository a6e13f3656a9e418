"""Worker and beat start-up hooks, connected by ``ExecutionsConfig.ready()``."""

from __future__ import annotations

import gc
import logging
from typing import Any

from celery.signals import (
    beat_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
)
from django.conf import settings

from notifyflow import db, logs

logger = logging.getLogger("notifyflow.celery")


def install() -> None:
    worker_init.connect(_worker_async_commit, weak=False, dispatch_uid="nf_async_commit")
    worker_init.connect(_worker_health, weak=False, dispatch_uid="nf_worker_health")
    worker_init.connect(_fix_kombu_timers, weak=False, dispatch_uid="nf_kombu_timers")
    worker_init.connect(_channel_slots, weak=False, dispatch_uid="nf_channel_slots")
    worker_init.connect(_metric_files, weak=False, dispatch_uid="nf_metric_files")
    worker_init.connect(_send_checks, weak=False, dispatch_uid="nf_send_checks")
    worker_ready.connect(_freeze_heap, weak=False, dispatch_uid="nf_freeze_heap")
    worker_process_init.connect(_freeze_heap, weak=False, dispatch_uid="nf_freeze_heap_child")
    beat_init.connect(_ensure_schedule, weak=False, dispatch_uid="nf_sweeper_schedule")
    task_prerun.connect(_bind_task_context, weak=False, dispatch_uid="nf_log_context_bind")
    task_postrun.connect(_unbind_task_context, weak=False, dispatch_uid="nf_log_context_unbind")


# task id -> the log context's exit, for the task's postrun (prerun and postrun run in
# the same thread of the same process, around the task).
_task_contexts: dict[str, Any] = {}


def _bind_task_context(task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    """Bind the task id and the request id its message carries (``send_task_on_commit``)
    for every log line of the task, and for the tasks it sends."""
    request = getattr(task, "request", None)
    rid = getattr(request, "request_id", None) or (getattr(request, "headers", None) or {}).get(
        "request_id"
    )
    context = logs.bound(task_id=task_id, request_id=rid)
    context.__enter__()
    _task_contexts[task_id] = context


def _unbind_task_context(task_id: str = "", **kwargs: Any) -> None:
    context = _task_contexts.pop(task_id, None)
    if context is not None:
        context.__exit__(None, None, None)


def _channel_slots(sender: Any = None, **kwargs: Any) -> None:
    """Each channel's sends may hold only a share of this worker's processes
    (executions.channel_slots): a hung provider leaves the others to other channels."""
    from . import channel_slots

    channel_slots.configure(worker=sender)


def _worker_async_commit(**kwargs: Any) -> None:
    """Workers commit asynchronously by default; the engine turns synchronous commit
    back on for the one statement that must survive a PostgreSQL crash (a step's
    outcome). What may be lost in such a crash is only ever safe to lose: a claim (the
    sweeper recovers the lease), a push or chat step's results so far (the documented
    at-least-once window), a sweeper pass (it runs again)."""
    if settings.NOTIFYFLOW_WORKER_ASYNC_COMMIT:
        db.commit_asynchronously()


def _worker_health(**kwargs: Any) -> None:
    """Drop dead database connections between tasks (CELERY_DB_REUSE_MAX keeps them, so
    Celery no longer does)."""
    from . import worker_health

    worker_health.install()


def _fix_kombu_timers(**kwargs: Any) -> None:
    if settings.NOTIFYFLOW_KOMBU_TIMER_FIX:
        from notifyflow.broker.kombu_patches import apply_kombu_timer_fix

        if apply_kombu_timer_fix():
            logger.warning("kombu timer fix applied (NOTIFYFLOW_KOMBU_TIMER_FIX)")


def _freeze_heap(**kwargs: Any) -> None:
    """Once the worker (or a prefork child) is up, what it has loaded lives as long as
    the process: out of the garbage collector's generations (``gc.freeze``), a full
    collection no longer walks it - a pause every task due at that moment waits for (a
    node holding a thousand countdown messages, bench "delay"), and CPU a step pays
    (the API's WSGI module does the same: ~20 % of a large request)."""
    gc.freeze()


def _metric_files(**kwargs: Any) -> None:
    """Before the pool forks: drop the metric files of this host's finished processes
    (a previous run's), never a running process's (notifyflow/metrics.py)."""
    from notifyflow import metrics

    removed = metrics.remove_dead_process_files()
    if removed:
        logger.info("removed %d metric files of finished processes", removed)


def _send_checks(**kwargs: Any) -> None:
    """What sending needs and lacks (``executions.checks``), as ERROR lines at start: the
    worker still runs every other workflow; the affected sends fail naming the cause."""
    from .checks import check_public_url

    for message in check_public_url(databases=["default"]):
        logger.error("%s: %s (%s)", message.id, message.msg, message.hint)


def _ensure_schedule(**kwargs: Any) -> None:
    from .schedule import ensure_sweeper_schedule

    ensure_sweeper_schedule()
