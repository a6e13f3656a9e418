"""A cancelled backlog costs nothing: the step messages of cancelled
instances are dropped from their lane's queue in bulk, never consumed one by one.

Such a message claims nothing, yet each one cost a worker a pool hand-off, a claim that
fails, a read and an ack, one after the other, while the rest of the lane waited behind
them (docs/measurements.md, "A cancelled backlog"). ``lane_sift`` drops them
all in one pass (``notifyflow.broker.sift``: on Redis one atomic script, on RabbitMQ a
consumer of our own that acks the stale ones and gives the others back in place). It
runs

- **when many are cancelled at once** (``cancel_many``: cancel by key of a fan-out, a
  batch that ends its members): after the commit, in the cancelling process, for each
  lane concerned (``sift_after_cancel``), so the call returns with the queue sifted;
- **when a worker meets them** (cancelled one by one - the admin, an erasure - or
  messages the first pass could not reach, such as those a worker held):
  ``SIFT_AFTER`` messages of cancelled instances within ``STREAK_S`` of each other in
  one process make it sift that queue (``message_of_cancelled_instance``), at most once
  per ``SIFT_EVERY_S`` in that process and, on Redis, among all processes.

No transition leaves ``cancelled``, so a message of a cancelled instance can never claim
anything again: dropping it loses nothing.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Collection, Iterable

from django.conf import settings
from django.db import transaction

from notifyflow import db
from notifyflow.broker.sift import SiftResult, sift
from notifyflow.celery import app

from .dispatch import EXECUTE_NODE_TASK, lane_queue
from .models import TriggerInstance, TriggerStatus

logger = logging.getLogger("notifyflow.triggers")

# A cancel of at least this many instances sifts their lanes at once.
SIFT_AFTER_CANCELLING = 500
# Messages of cancelled instances one process meets in one queue, each within STREAK_S
# of the one before, before it sifts that queue; at most once per SIFT_EVERY_S.
SIFT_AFTER = 10
STREAK_S = 2.0
SIFT_EVERY_S = 5.0
# The oldest messages of a queue one sift looks at, and its time budget (within a
# step's soft time limit, with room to spare).
SIFT_WINDOW = 50_000
SIFT_BUDGET_S = 10.0
# Ids per query asking which instances are cancelled.
QUERY_CHUNK = 5000

# How a step message names its instance (``str(uuid)``): matched, not parsed - a
# backlog's worth of ``uuid.UUID()`` calls was a visible part of a sift.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

_lock = threading.Lock()
_streaks: dict[str, tuple[int, float]] = {}  # queue -> (count, time of the last one)
_last_sift: dict[str, float] = {}


def sift_after_cancel(*, lanes: Iterable[str], cancelled: int) -> None:
    """``cancelled`` instances of ``lanes`` were just cancelled: if they are many, sift
    those lanes once the transaction commits (at once outside one)."""
    if cancelled < SIFT_AFTER_CANCELLING:
        return
    for queue in sorted({lane_queue(lane) for lane in lanes}):
        transaction.on_commit(functools.partial(lane_sift, queue=queue))


def message_of_cancelled_instance(*, lane: str) -> SiftResult | None:
    """A worker took a message of a cancelled instance from ``lane``'s queue: counted,
    and once the streak is long enough the queue is sifted (the result; else None)."""
    queue = lane_queue(lane)
    now = time.monotonic()
    with _lock:
        count, last = _streaks.get(queue, (0, now))
        count = count + 1 if now - last <= STREAK_S else 1
        due = count >= SIFT_AFTER and now - _last_sift.get(queue, -SIFT_EVERY_S) >= SIFT_EVERY_S
        _streaks[queue] = (0, now) if due else (count, now)
        if due:
            _last_sift[queue] = now
    return lane_sift(queue=queue, every_s=SIFT_EVERY_S) if due else None


def lane_sift(*, queue: str, every_s: float | None = None) -> SiftResult:
    """Drop the step messages of cancelled instances from ``queue`` (a lane's) in one
    pass. A broker error is logged, never raised: the messages then take their course
    one by one, as they would have."""
    started = time.monotonic()
    budget_s = min(SIFT_BUDGET_S, settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S / 2)
    try:
        result = sift(
            app,
            queue,
            task=EXECUTE_NODE_TASK,
            stale=cancelled_ids,
            window=SIFT_WINDOW,
            budget_s=budget_s,
            every_s=every_s,
        )
    except Exception as exc:  # noqa: BLE001 - a saving, never a reason to fail a caller
        logger.warning("sifting %s for messages of cancelled instances failed: %s", queue, exc)
        return SiftResult(0, 0)
    if result.dropped:
        logger.info(
            "sifted %s: dropped %d messages of cancelled instances (of %d looked at) in %.2fs",
            queue,
            result.dropped,
            result.scanned,
            time.monotonic() - started,
        )
    return result


def cancelled_ids(ids: Collection[str]) -> set[str]:
    """Those of ``ids`` that name a cancelled instance (a string that is not a UUID in
    its usual spelling names none)."""
    valid = [value for value in ids if _UUID.fullmatch(value)]
    found: set[str] = set()
    for start in range(0, len(valid), QUERY_CHUNK):
        rows = (
            TriggerInstance.objects.order_by()
            .filter(db.uuid_in("pk", valid[start : start + QUERY_CHUNK]))
            .filter(status=TriggerStatus.CANCELLED)
            .values_list("pk", flat=True)
        )
        found.update(str(pk) for pk in rows)
    return found


def reset() -> None:
    """Forget the streaks and sift times (tests)."""
    with _lock:
        _streaks.clear()
        _last_sift.clear()
