"""The Celery app, and the one way the project enqueues work: after commit, by task name,
ids only. Worker and beat start-up hooks belong to the apps that need them
(``executions.apps``), so nothing here imports a layer above ``notifyflow``."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from typing import Any

from celery import Celery
from django.db import transaction
from kombu.exceptions import BatchPublishError, LimitExceeded
from kombu.exceptions import OperationalError as KombuOperationalError

from . import logs
from .broker.publish import BATCH_COMMANDS_PER_MESSAGE, PublishContext, Publisher

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifyflow.settings")

logger = logging.getLogger("notifyflow.celery")

app = Celery("notifyflow")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes every DB connection after every task unless this is
# set (a new connection per step; bench/README.md). It is read as a raw key.
app.conf.CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000000"))
app.conf.worker_disable_rate_limits = True
app.autodiscover_tasks()
# How messages reach the broker: Celery's send_task, or its Redis mirror
# (NOTIFYFLOW_FAST_PUBLISH, notifyflow/broker/publish.py).
publisher = Publisher(app)


@functools.cache
def _acquire_timeout() -> float | None:
    return app.conf.broker_pool_acquire_timeout


def producer() -> Any:
    """A producer of the app's pool, for ``with``: what ``app.producer_or_acquire()``
    gives, read without its two configuration lookups a message (Django's settings
    behind Celery's: ~15 us of a step's publish, bench/RESULTS.md "Issue 44, fifth
    round"). A pool with no producer free within CELERY_BROKER_POOL_ACQUIRE_TIMEOUT
    raises kombu's OperationalError, as Celery's does."""
    try:
        return app.producer_pool.acquire(block=True, timeout=_acquire_timeout())
    except LimitExceeded as exc:
        raise KombuOperationalError(f"no broker producer free: {exc}") from exc


def send_task_on_commit(
    name: str, *args: Any, countdown: float | None = None, queue: str | None = None
) -> None:
    """Send task ``name`` with ``args`` (ids only) once the surrounding transaction commits,
    to ``queue`` (by name; None: the task's route, CELERY_TASK_ROUTES).

    Outside a transaction Django runs the callback at once. Carries the current
    request id (``notifyflow.logs``) in the message's headers. A message sent before commit
    could be consumed by a worker that cannot see the row yet. By name, so a lower layer
    can start work that a higher one defines.

    If the broker stays unreachable through the publish retries
    (CELERY_TASK_PUBLISH_RETRY_POLICY), the failure is logged and swallowed: the row is
    committed with its ``dispatched_at``, so the sweeper re-sends the message once that
    is NOTIFYFLOW_REDISPATCH_AFTER_S old. An API call answers as if it had been sent.
    """
    # The request id of the API call (or the task) that causes this one travels as a
    # message header, so the next task's log lines carry it too (executions.worker_hooks).
    rid = logs.request_id()
    headers = {"request_id": rid} if rid else None

    def send() -> None:
        try:
            with producer() as pooled:
                publisher.publish(pooled, name, [args], headers, countdown=countdown, queue=queue)
        except KombuOperationalError as exc:
            logger.warning("broker unavailable, %s%s left for the sweeper: %s", name, args, exc)

    transaction.on_commit(send)


def send_tasks_on_commit(
    name: str, args_list: Sequence[tuple[Any, ...]], queue: str | None = None
) -> None:
    """``send_task_on_commit`` for many messages of one task: after commit, all of them
    through one producer in one Redis pipeline (kombu's ``Producer.batch``; a transport
    without batches publishes them one by one on the same connection).

    Same headers and the same failure semantics: a broker that stays unreachable is
    logged and the messages are left to the sweeper (those not yet flushed; the rows are
    committed with their ``dispatched_at``)."""
    if not args_list:
        return
    context = publish_context()
    messages = list(args_list)
    transaction.on_commit(lambda: send_tasks(name, messages, context, queue))


def publish_context() -> PublishContext:
    """What a message takes from the code that causes it - the request id header, the
    sending task's (root, parent) ids - captured now, for ``send_tasks`` to use later,
    possibly from another thread."""
    rid = logs.request_id()
    return PublishContext({"request_id": rid} if rid else None, publisher.parent_ids())


def send_tasks(
    name: str,
    messages: list[tuple[Any, ...]],
    context: PublishContext,
    queue: str | None = None,
) -> None:
    """Publish ``messages`` of task ``name`` to ``queue`` now (their rows are committed),
    with ``context`` (``publish_context``); see ``send_tasks_on_commit``."""
    try:
        with producer() as pooled:
            # One flush, when the batch closes: outside kombu's retrying publish
            # (a flush inside it would be retried on a new channel, which the batch
            # refuses), so the transport's own connection errors surface here, and on
            # Redis a failed flush as BatchPublishError ("delivery is uncertain": the
            # sweeper re-sends; a message that did go out is claimed once anyway).
            errors = (
                KombuOperationalError,
                BatchPublishError,
                *pooled.connection.connection_errors,
            )
            try:
                batch_size = BATCH_COMMANDS_PER_MESSAGE * len(messages)
                with pooled.batch(max_size=batch_size):
                    publisher.publish(
                        pooled,
                        name,
                        messages,
                        context.headers,
                        parents=context.parents,
                        queue=queue,
                    )
            except errors as exc:
                _left_for_sweeper(name, len(messages), exc)
    except KombuOperationalError as exc:
        _left_for_sweeper(name, len(messages), exc)


def _left_for_sweeper(name: str, count: int, exc: BaseException) -> None:
    logger.warning("broker unavailable, %d %s messages left for the sweeper: %s", count, name, exc)
