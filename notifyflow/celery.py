"""The Celery app, and the one way the project enqueues work: after commit, by task name,
ids only. Worker and beat start-up hooks belong to the apps that need them
(``executions.apps``), so nothing here imports a layer above ``notifyflow``."""

from __future__ import annotations

import json
import logging
import os
from base64 import b64encode
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celery import Celery, signals
from celery.utils import uuid
from celery.utils.saferepr import saferepr
from django.db import transaction
from kombu.entity import DELIVERY_MODES
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from . import logs
from .kombu_redis import Channel as FastPublishChannel

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifyflow.settings")

logger = logging.getLogger("notifyflow.celery")
# The stdlib's cached encoder (kombu's ``dumps`` builds a new encoder class instance on
# every call); ids and strings only go through it, anything else falls back to kombu.
_json_dumps = json.dumps

app = Celery("notifyflow")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes every DB connection after every task unless this is
# set (costs ~4x in steps/s). It is read as a raw key.
app.conf.CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000000"))
app.conf.worker_disable_rate_limits = True
app.autodiscover_tasks()


def send_task_on_commit(name: str, *args: Any, countdown: float | None = None) -> None:
    """Send task ``name`` with ``args`` (ids only) once the surrounding transaction commits.

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
            with app.producer_or_acquire() as producer:
                _publish_many(producer, name, [args], headers, countdown=countdown)
        except KombuOperationalError as exc:
            logger.warning("broker unavailable, %s%s left for the sweeper: %s", name, args, exc)

    transaction.on_commit(send)


def send_tasks_on_commit(name: str, args_list: Sequence[tuple[Any, ...]]) -> None:
    """``send_task_on_commit`` for many messages of one task: after commit, all of them
    through one producer in one Redis pipeline (kombu's ``Producer.batch``; a transport
    without batches publishes them one by one on the same connection).

    Same headers and the same failure semantics: a broker that stays unreachable is
    logged and the messages are left to the sweeper (those not yet flushed; the rows are
    committed with their ``dispatched_at``)."""
    if not args_list:
        return
    rid = logs.request_id()
    headers = {"request_id": rid} if rid else None
    messages = list(args_list)

    def send() -> None:
        try:
            with app.producer_or_acquire() as producer:
                # One flush, when the batch closes: outside kombu's retrying publish
                # (a flush inside it would be retried on a new channel, which the batch
                # refuses), so the transport's own connection errors surface here.
                errors = (KombuOperationalError, *producer.connection.connection_errors)
                try:
                    with producer.batch(max_size=_MAX_BATCH_COMMANDS * len(messages)):
                        _publish_many(producer, name, messages, headers)
                except errors as exc:
                    _left_for_sweeper(name, len(messages), exc)
        except KombuOperationalError as exc:
            _left_for_sweeper(name, len(messages), exc)

    transaction.on_commit(send)


def _publish_many(
    producer: Any,
    name: str,
    messages: list[tuple[Any, ...]],
    headers: dict[str, str] | None,
    countdown: float | None = None,
) -> None:
    """``app.send_task(name, args, countdown=..., headers=...)`` for each of
    ``messages``, minus what ``send_task`` redoes on every call (its router, result and
    option bookkeeping, kombu's declare of the queue: ~40% of a publish, bench/README.md
    "bulk"). The message is Celery's own (``create_task_message``, with the parent and
    root ids of the task sending it, as ``send_task`` sets them), sent by Celery's
    ``send_task_message`` - with the configured publish retries - to the route of
    ``name``; the queue is declared by the first publish of the process."""
    amqp = app.amqp
    route = _routes.get(name)
    if route is None:
        route = _routes[name] = amqp.router.route({}, name)
    root_id = parent_id = None
    parent = app.current_worker_task
    if parent is not None:
        root_id = parent.request.root_id or parent.request.id
        parent_id = parent.request.id
    if name in _declared and _fast_publish(producer, name, route, messages, headers, countdown):
        return
    limits = _task_limits(name) or {}
    for args in messages:
        message = amqp.create_task_message(
            uuid(),
            name,
            args,
            {},
            countdown=countdown,
            reply_to=app.thread_oid,
            root_id=root_id,
            parent_id=parent_id,
            ignore_result=None,  # as send_task sends it
            **limits,
        )
        declare: dict[str, Any] = {"declare": []} if name in _declared else {}
        amqp.send_task_message(producer, name, message, headers=headers, **route, **declare)
        _declared.add(name)


@dataclass(frozen=True)
class _FastRoute:
    """What every message of one task shares on the fast path, computed once per
    process from Celery's and kombu's own objects: the queue's list, the delivery mode,
    and a message Celery built (its headers and body are the template)."""

    queue: str
    delivery_mode: int
    headers: dict[str, Any]
    body_tail: list[Any]  # (kwargs, embed) of protocol 2's (args, kwargs, embed)
    repr_maxsize: int
    repr_maxlevels: int


_fast_routes: dict[str, _FastRoute | None] = {}


def _task_limits(name: str) -> dict[str, Any] | None:
    """The time limits ``send_task`` copies from the task's own options when the task
    is registered in this process; None if it would copy more than those."""
    task = app.tasks.get(name)
    options = task._get_exec_options() if task is not None else {}
    given = {key: value for key, value in options.items() if value is not None}
    if given.get("serializer") == app.conf.task_serializer:
        del given["serializer"]  # every task has one: the app's
    if set(given) - {"time_limit", "soft_time_limit"}:
        return None
    return given


def _fast_route(channel: Any, name: str, route: dict[str, Any]) -> _FastRoute | None:
    """The task's _FastRoute, or None when its transport part is not the plain one
    ``_fast_publish`` mirrors: another transport, routing other than a direct queue,
    another serializer, compression, priorities, queue expiry, sent events."""
    if name in _fast_routes:
        return _fast_routes[name]
    queue: Any = route.get("queue")
    conf = app.conf
    limits = _task_limits(name)
    fast = None
    if (
        limits is not None
        and isinstance(channel, FastPublishChannel)
        and channel.body_encoding == "base64"
        and set(route) == {"queue"}
        and getattr(queue, "name", None)
        and queue.exchange.type == "direct"
        and not queue.queue_arguments
        and not queue.max_priority
        and not (channel._expires and queue.name in channel._expires)
        and conf.task_serializer == "json"
        and not conf.task_compression
        and not conf.task_send_sent_event
    ):
        sample = app.amqp.create_task_message(
            "template", name, (), {}, ignore_result=None, reply_to="", **limits
        )
        mode = queue.exchange.delivery_mode or conf.task_default_delivery_mode
        fast = _FastRoute(
            queue=queue.name,
            delivery_mode=DELIVERY_MODES.get(mode, mode),
            headers=dict(sample.headers),
            body_tail=list(sample.body[1:]),
            repr_maxsize=app.amqp.argsrepr_maxsize,
            repr_maxlevels=conf.task_repr_maxlevels,
        )
    _fast_routes[name] = fast
    return fast


def _fast_publish(
    producer: Any,
    name: str,
    route: dict[str, Any],
    messages: list[tuple[Any, ...]],
    headers: dict[str, str] | None,
    countdown: float | None,
) -> bool:
    """Publish ``messages`` as ``send_task`` over kombu's Redis transport would - the
    same headers, body and envelope, LPUSHed onto the queue's list - in one round trip,
    without the per-message work of Celery's message builder and kombu's producer
    (settings lookups, a JSON encoder built per call, retry wrappers, envelope copies).

    False, having sent nothing, when this is not the plain case it mirrors
    (``_fast_route``), for a countdown (an ETA), with publish signal receivers, or args
    that are not plain JSON: the caller then publishes the usual way.
    tests/notifyflow/test_task_publish.py compares the result with ``send_task``'s, field by field.
    A Redis error is raised as kombu's OperationalError (the caller's "left for the
    sweeper" path)."""
    if (
        countdown is not None
        or signals.before_task_publish.receivers
        or signals.after_task_publish.receivers
    ):
        return False
    fast = _fast_route(producer.channel, name, route)
    if fast is None:
        return False
    root_id = parent_id = None
    parent = app.current_worker_task
    if parent is not None:
        root_id = parent.request.root_id or parent.request.id
        parent_id = parent.request.id
    properties_tail = {
        "reply_to": app.thread_oid,
        "delivery_mode": fast.delivery_mode,
        "priority": 0,
        "delivery_info": {"exchange": "", "routing_key": fast.queue},
        "body_encoding": "base64",
    }
    envelopes = []
    try:
        for args in messages:
            task_id = uuid()
            task_headers = {
                **fast.headers,
                "id": task_id,
                "root_id": root_id or task_id,
                "parent_id": parent_id,
                "argsrepr": saferepr(args, fast.repr_maxsize, maxlevels=fast.repr_maxlevels),
                **(headers or {}),
            }
            body = _json_dumps([list(args), *fast.body_tail]).encode("utf-8")
            envelopes.append(
                _json_dumps(
                    {
                        "body": b64encode(body).decode("ascii"),
                        "content-encoding": "utf-8",
                        "content-type": "application/json",
                        "headers": task_headers,
                        "properties": {
                            "correlation_id": task_id,
                            **properties_tail,
                            "delivery_tag": uuid(),
                        },
                    }
                )
            )
    except (TypeError, ValueError):  # not plain JSON: kombu's encoder knows more types
        return False
    try:
        with producer.channel.conn_or_acquire() as client:
            if len(envelopes) == 1:
                client.lpush(fast.queue, envelopes[0])
            else:
                with client.pipeline(transaction=False) as pipe:
                    for envelope in envelopes:
                        pipe.lpush(fast.queue, envelope)
                    pipe.execute()
    except RedisError as exc:
        raise KombuOperationalError(str(exc)) from exc
    return True


# Task name -> its route (queue), and the names whose queue this process declared.
_routes: dict[str, dict[str, Any]] = {}
_declared: set[str] = set()


# Redis commands one message may add to a batch (LPUSH, plus PEXPIRE per priority
# queue when queues expire).
_MAX_BATCH_COMMANDS = 16


def _left_for_sweeper(name: str, count: int, exc: BaseException) -> None:
    logger.warning("broker unavailable, %d %s messages left for the sweeper: %s", count, name, exc)
