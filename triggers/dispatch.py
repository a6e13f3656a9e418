"""Handing instances to the broker. The database decides what is due; this only sends."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from notifyflow.broker.depth import ready_messages
from notifyflow.celery import (
    app,
    publish_context,
    send_task_on_commit,
    send_tasks,
    send_tasks_on_commit,
)
from workflows.models import Priority

# The task that runs one step (executions.tasks); sent by name so nothing below the
# executions layer imports it.
EXECUTE_NODE_TASK = "notifyflow.execute_node"

# Each priority lane's queue, most urgent first: CELERY_TASK_QUEUES lists them in
# this order, which is the order a plain worker takes them in.
LANE_QUEUES = {
    Priority.CRITICAL: "notifyflow.critical",
    Priority.HIGH: "notifyflow.high",
    Priority.NORMAL: "notifyflow.default",
    Priority.BULK: "notifyflow.bulk",
}


def lane_queue(lane: str) -> str:
    """The queue of ``lane`` (a ``Priority`` value); ValueError for anything else."""
    try:
        return LANE_QUEUES[Priority(lane)]
    except ValueError:
        raise ValueError(f"unknown lane {lane!r}") from None


def dispatch_on_commit(
    instance_id: uuid.UUID | str, *, lane: str, countdown: float | None = None
) -> None:
    """Send ``execute_node(instance_id)`` to ``lane``'s queue (the instance's own
    ``lane``) after commit, ``countdown`` seconds later.

    Callers never pass a countdown beyond NOTIFYFLOW_BROKER_HORIZON_S: longer waits stay
    in the database and the sweeper dispatches them when due.
    """
    if countdown is not None and countdown <= 0:
        countdown = None
    if countdown is not None and countdown > settings.NOTIFYFLOW_BROKER_HORIZON_S:
        raise ValueError(f"countdown {countdown}s is beyond the broker horizon")
    queue = lane_queue(lane)
    send_task_on_commit(EXECUTE_NODE_TASK, str(instance_id), countdown=countdown, queue=queue)


def dispatch_many_on_commit(instances: Iterable[tuple[uuid.UUID | str, str]]) -> None:
    """``dispatch_on_commit`` (no countdown) for many ``(instance_id, lane)``: one
    pipelined publish per lane, the most urgent lane's first."""
    by_queue: dict[str, list[tuple[str]]] = {queue: [] for queue in LANE_QUEUES.values()}
    for instance_id, lane in instances:
        by_queue[lane_queue(lane)].append((str(instance_id),))
    for name, messages in by_queue.items():
        if messages:
            send_tasks_on_commit(EXECUTE_NODE_TASK, messages, name)


def queued_messages(lanes: Iterable[str]) -> dict[str, int] | None:
    """Step messages waiting in each lane's queue, not yet taken by a worker (Redis,
    RabbitMQ); None when the broker cannot say (the embedded ones)."""
    by_queue = {lane_queue(lane): lane for lane in lanes}
    ready = ready_messages(app, by_queue)
    return None if ready is None else {by_queue[queue]: n for queue, n in ready.items()}


class BackgroundDispatch:
    """``dispatch_many_on_commit`` of one lane (every instance of a fan-out shares its
    lane) whose publish runs in a thread: after each commit the
    ids are handed to one publishing thread, which sends them in the order handed over
    while the caller writes its next batch (the fan-out's batches: the INSERT waits on
    PostgreSQL while the thread builds and sends the previous batch's messages).

    At most ``depth`` committed batches wait for the thread (then the caller waits), and
    ``close()`` (leaving the ``with`` block) waits until everything handed over is sent,
    so a job returns only after its messages are out. A process killed before that
    leaves committed rows unsent, as a kill between commit and publish always could:
    their ``dispatched_at`` is set, and the sweeper re-sends them. An error the thread
    met is raised by ``close()``."""

    def __init__(self, *, lane: str, depth: int = 2) -> None:
        self._broker_queue = lane_queue(lane)
        self._queue: queue.Queue[list[tuple[str]] | None] = queue.Queue(maxsize=depth)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._context = publish_context()

    def __enter__(self) -> BackgroundDispatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_commit(self, instance_ids: Iterable[uuid.UUID | str]) -> None:
        """Hand ``instance_ids`` to the thread once the surrounding transaction commits."""
        messages = [(str(instance_id),) for instance_id in instance_ids]
        if messages:
            transaction.on_commit(lambda: self._put(messages))

    def _put(self, messages: list[tuple[str]]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="notifyflow-dispatch", daemon=True
            )
            self._thread.start()
        self._queue.put(messages)

    def _run(self) -> None:
        while (messages := self._queue.get()) is not None:
            if self._error is not None:
                continue  # keep draining so the caller never blocks; close() raises
            try:
                send_tasks(EXECUTE_NODE_TASK, messages, self._context, self._broker_queue)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller by close()
                self._error = exc

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
