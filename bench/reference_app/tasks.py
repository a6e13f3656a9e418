"""The Celery reference: a task that does nothing, with the project's task settings
(acks_late, prefetch 1, same broker), timed from inside so the drain rate is exact."""

from __future__ import annotations

import json
import time

from celery import shared_task

_stats = {"count": 0, "first": 0.0, "last": 0.0}


@shared_task(name="bench.noop", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def noop() -> None:
    now = time.time()
    if not _stats["count"]:
        _stats["first"] = now
    _stats["count"] += 1
    _stats["last"] = now


def noop_stats_json() -> str:
    return json.dumps(_stats)
