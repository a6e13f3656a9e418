"""Putting a task's messages on the broker: Celery's own ``send_task``, or a mirror of it.

``NOTIFYFLOW_FAST_PUBLISH`` off: every message goes through ``app.send_task`` (Celery's
message builder and kombu's producer), nothing of ours on the way.

On (the default): what ``send_task`` redoes on every call is done once per task name
per process - its router, result and option bookkeeping, kombu's declare of the queue
(bench "bulk", bench/README.md) - and on kombu's Redis transport, once the queue is
declared, the envelope kombu would write is built here and LPUSHed onto the queue's
list, a batch in one LPUSH command. Whatever that mirror does not cover (another
transport or serializer, publish signal receivers, args that are not plain JSON...)
goes through Celery's ``create_task_message`` and ``send_task_message`` as
``send_task`` would. tests/notifyflow/broker/test_publish.py compares every path's
messages with ``send_task``'s, field by field, so a Celery or kombu release that changes
the format fails there.
"""

from __future__ import annotations

import json
import os
import re
from base64 import b64encode
from dataclasses import dataclass
from typing import Any

from celery import Celery, signals
from celery.utils import uuid
from celery.utils.saferepr import saferepr
from celery.utils.time import add_seconds_to_datetime, maybe_make_aware
from django.conf import settings
from kombu.entity import DELIVERY_MODES
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from .kombu_patches import Channel as RedisChannel

# The stdlib's cached encoder (kombu's ``dumps`` builds a new encoder class instance on
# every call); ids and strings only go through it, anything else falls back to kombu.
_json_dumps = json.dumps

# Redis commands one message may add to a kombu batch (LPUSH, plus PEXPIRE per priority
# queue when queues expire): sizes ``Producer.batch`` so it flushes once, at the end.
BATCH_COMMANDS_PER_MESSAGE = 16
# Messages per LPUSH command of the Redis mirror (a few MiB at most per command).
LPUSH_CHUNK = 2000


@dataclass(frozen=True)
class _Envelope:
    """What every message of one task shares on the Redis mirror, computed once per
    process from Celery's and kombu's own objects: the queue's list, the delivery mode,
    and a message Celery built (its headers and body are the template)."""

    queue: str
    delivery_mode: int
    headers: dict[str, Any]
    body_tail: list[Any]  # (kwargs, embed) of protocol 2's (args, kwargs, embed)
    body_tail_json: str  # the body after its args: ``json(body_tail)`` without its "["
    repr_maxsize: int
    repr_maxlevels: int


# A task name and the queue its messages were asked to go to (None: the task's route).
_Key = tuple[str, str | None]


@dataclass(frozen=True)
class PublishContext:
    """What messages take from the code that causes them, captured where it runs (a
    publish may happen later, in another thread): the headers (the request id) and the
    sending task's (root_id, parent_id)."""

    headers: dict[str, str] | None
    parents: tuple[str | None, str | None]


class Publisher:
    """Publishes messages of a task by name on a producer, as ``app.send_task`` would.

    One per Celery app (``notifyflow.celery.publisher``); it keeps, per task name and
    queue, the route, whether this process declared the queue, and the Redis envelope
    template."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._routes: dict[_Key, dict[str, Any]] = {}
        self._declared: set[_Key] = set()
        self._envelopes: dict[_Key, _Envelope | None] = {}

    def publish(
        self,
        producer: Any,
        name: str,
        messages: list[tuple[Any, ...]],
        headers: dict[str, str] | None,
        countdown: float | None = None,
        parents: tuple[str | None, str | None] | None = None,
        queue: str | None = None,
    ) -> None:
        """``app.send_task(name, args, countdown=..., headers=..., queue=...)`` for each
        args of ``messages``, on ``producer`` (inside its ``batch()`` if the caller opened
        one). ``queue``: a queue of CELERY_TASK_QUEUES by name; None: the task's route.
        ``parents``: the (root_id, parent_id) to send, when not the current task's
        (``parent_ids()`` captured in the thread that caused the messages).
        A broker error is raised as kombu's OperationalError (or, from a batch's flush,
        the transport's connection error), after the configured publish retries."""
        if parents is None:
            parents = self.parent_ids()
        if not settings.NOTIFYFLOW_FAST_PUBLISH:
            root_id, parent_id = parents
            for args in messages:
                self.app.send_task(
                    name,
                    args,
                    countdown=countdown,
                    headers=headers,
                    producer=producer,
                    root_id=root_id,
                    parent_id=parent_id,
                    queue=queue,
                )
            return
        key = (name, queue)
        route = self._routes.get(key)
        if route is None:
            options = {"queue": queue} if queue else {}
            route = self._routes[key] = self.app.amqp.router.route(options, name)
        declared = key in self._declared
        if declared and self._push(producer, key, route, messages, headers, countdown, parents):
            return
        self._send(producer, key, route, messages, headers, countdown, parents)

    def parent_ids(self) -> tuple[str | None, str | None]:
        """(root_id, parent_id) of the task sending, as ``send_task`` sets them."""
        parent = self.app.current_worker_task
        if parent is None:
            return None, None
        return parent.request.root_id or parent.request.id, parent.request.id

    def _send(
        self,
        producer: Any,
        key: _Key,
        route: dict[str, Any],
        messages: list[tuple[Any, ...]],
        headers: dict[str, str] | None,
        countdown: float | None,
        parents: tuple[str | None, str | None],
    ) -> None:
        """Celery's own message (``create_task_message``) sent by Celery's
        ``send_task_message`` - with the configured publish retries - to ``route``;
        the queue is declared by the first publish of the process."""
        name = key[0]
        amqp = self.app.amqp
        root_id, parent_id = parents
        limits = self._task_limits(name) or {}
        for args in messages:
            message = amqp.create_task_message(
                uuid(),
                name,
                args,
                {},
                countdown=countdown,
                reply_to=self.app.thread_oid,
                root_id=root_id,
                parent_id=parent_id,
                ignore_result=None,  # as send_task sends it
                **limits,
            )
            declare: dict[str, Any] = {"declare": []} if key in self._declared else {}
            amqp.send_task_message(producer, name, message, headers=headers, **route, **declare)
            self._declared.add(key)

    def _task_limits(self, name: str) -> dict[str, Any] | None:
        """The time limits ``send_task`` copies from the task's own options when the
        task is registered in this process; None if it would copy more than those."""
        task = self.app.tasks.get(name)
        options = task._get_exec_options() if task is not None else {}
        given = {key: value for key, value in options.items() if value is not None}
        if given.get("serializer") == self.app.conf.task_serializer:
            del given["serializer"]  # every task has one: the app's
        if set(given) - {"time_limit", "soft_time_limit"}:
            return None
        return given

    def _envelope(self, channel: Any, key: _Key, route: dict[str, Any]) -> _Envelope | None:
        """The task's envelope template, or None when its transport part is not the
        plain one ``_push`` mirrors: another transport, routing other than a direct
        queue, another serializer, compression, priorities, queue expiry, sent events."""
        if key in self._envelopes:
            return self._envelopes[key]
        name = key[0]
        queue: Any = route.get("queue")
        conf = self.app.conf
        limits = self._task_limits(name)
        envelope = None
        if (
            limits is not None
            and isinstance(channel, RedisChannel)
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
            sample = self.app.amqp.create_task_message(
                "template", name, (), {}, ignore_result=None, reply_to="", **limits
            )
            mode = queue.exchange.delivery_mode or conf.task_default_delivery_mode
            envelope = _Envelope(
                queue=queue.name,
                delivery_mode=DELIVERY_MODES.get(mode, mode),
                headers=dict(sample.headers),
                body_tail=list(sample.body[1:]),
                body_tail_json=_json_dumps(list(sample.body[1:]))[1:],
                repr_maxsize=self.app.amqp.argsrepr_maxsize,
                repr_maxlevels=conf.task_repr_maxlevels,
            )
        self._envelopes[key] = envelope
        return envelope

    def _push(
        self,
        producer: Any,
        key: _Key,
        route: dict[str, Any],
        messages: list[tuple[Any, ...]],
        headers: dict[str, str] | None,
        countdown: float | None,
        parents: tuple[str | None, str | None],
    ) -> bool:
        """Publish ``messages`` as ``send_task`` over kombu's Redis transport would -
        the same headers, body and envelope, LPUSHed onto the queue's list - in one
        round trip, without the per-message work of Celery's message builder and kombu's
        producer (settings lookups, a JSON encoder built per call, retry wrappers,
        envelope copies).

        A countdown is the ``eta`` header Celery computes from it (a delay's, a retry's
        message: on kombu's Redis transport an ETA message is an ordinary one the
        worker holds until then); Celery's builder for one cost ~0.3 ms of CPU a step
        more than this (bench/RESULTS.md, "Issue 44, third round").

        False, having sent nothing, when this is not the plain case it mirrors
        (``_envelope``), with publish signal receivers, or args that are not plain
        JSON: the caller then publishes the usual way. A Redis error is raised as
        kombu's OperationalError (the caller's "left for the sweeper" path)."""
        if signals.before_task_publish.receivers or signals.after_task_publish.receivers:
            return False
        envelope = self._envelope(producer.channel, key, route)
        if envelope is None:
            return False
        try:
            encoded = self._encode(envelope, messages, headers, parents, self._eta(countdown))
        except (TypeError, ValueError):  # not plain JSON: kombu's encoder knows more types
            return False
        try:
            # One LPUSH per LPUSH_CHUNK messages (pushed one after the other, as that
            # many LPUSHes would): a command to pack and parse per chunk, not per message.
            with producer.channel.conn_or_acquire() as client:
                with client.pipeline(transaction=False) as pipe:
                    for start in range(0, len(encoded), LPUSH_CHUNK):
                        pipe.lpush(envelope.queue, *encoded[start : start + LPUSH_CHUNK])
                    pipe.execute()
        except RedisError as exc:
            raise KombuOperationalError(str(exc)) from exc
        return True

    def _eta(self, countdown: float | None) -> str | None:
        """The ``eta`` header ``send_task(countdown=...)`` writes (protocol 2): now in
        the app's time zone plus the countdown, in ISO form; None without one."""
        if not countdown:
            return None
        now = self.app.now()
        return maybe_make_aware(
            add_seconds_to_datetime(now, countdown), tz=self.app.timezone
        ).isoformat()

    def _encode(
        self,
        envelope: _Envelope,
        messages: list[tuple[Any, ...]],
        headers: dict[str, str] | None,
        parents: tuple[str | None, str | None],
        eta: str | None,
    ) -> list[str]:
        """Each message's envelope as kombu's Redis transport serializes it: the
        envelope is serialized once per call with placeholders (``_template``), then
        each message fills in its ids, argsrepr and body."""
        fill = self._template(envelope, headers, parents, eta).format
        tail = envelope.body_tail_json
        ids = _uuid4s(2 * len(messages))
        # A step's message: one plain id (``_PLAIN``: its JSON, repr and argsrepr need
        # no escaping) whose length is a multiple of 3, as an instance id's 36. Its body
        # ``[["<id>"], <tail>`` is then base64 of ``[["`` + base64 of the id + base64 of
        # ``"], <tail>`` (base64 maps every 3 bytes to 4 characters on its own).
        body_end = b64encode(f'"], {tail}'.encode()).decode("ascii")
        encoded = []
        for index, args in enumerate(messages):
            first = args[0] if len(args) == 1 else None
            if type(first) is str and len(first) % 3 == 0 and _PLAIN.fullmatch(first):
                argsrepr = f"('{first}',)"
                body = f"W1si{b64encode(first.encode()).decode('ascii')}{body_end}"
            else:
                argsrepr = _json_dumps(_argsrepr(args, envelope))[1:-1]
                raw = f"[{_json_dumps(list(args))}, {tail}".encode()
                body = b64encode(raw).decode("ascii")
            encoded.append(
                fill(task=ids[2 * index], tag=ids[2 * index + 1], argsrepr=argsrepr, body=body)
            )
        return encoded

    def _template(
        self,
        envelope: _Envelope,
        headers: dict[str, str] | None,
        parents: tuple[str | None, str | None],
        eta: str | None,
    ) -> str:
        """The serialized envelope of this call's messages as a ``str.format`` template
        whose fields are what differs per message (``_SLOTS``)."""
        root_id, parent_id = parents
        task = _SLOTS["task"]
        sample = {
            "body": _SLOTS["body"],
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                **envelope.headers,
                "id": task,
                "root_id": root_id or task,
                "parent_id": parent_id,
                "argsrepr": _SLOTS["argsrepr"],
                "eta": eta,
                **(headers or {}),
            },
            "properties": {
                "correlation_id": task,
                "reply_to": self.app.thread_oid,
                "delivery_mode": envelope.delivery_mode,
                "priority": 0,
                "delivery_info": {"exchange": "", "routing_key": envelope.queue},
                "body_encoding": "base64",
                "delivery_tag": _SLOTS["tag"],
            },
        }
        text = _json_dumps(sample).replace("{", "{{").replace("}", "}}")
        for name, slot in _SLOTS.items():
            text = text.replace(slot, "{" + name + "}")
        return text


# The per-message fields of ``Publisher._template`` (strings JSON writes as they are).
_SLOTS = {name: f"@@notifyflow-{name}@@" for name in ("task", "tag", "argsrepr", "body")}
# The variant nibble of a UUID (RFC 9562: 0b10xx), indexed by a random nibble.
_VARIANT = "89ab" * 4


def _uuid4s(count: int) -> list[str]:
    """``count`` random UUIDs (version 4) as strings, as kombu's ``uuid()`` makes them,
    from one read of the OS's random source (``uuid()`` is ~3 us each, this ~0.5)."""
    raw = os.urandom(16 * count).hex()
    return [
        f"{raw[i : i + 8]}-{raw[i + 8 : i + 12]}-4{raw[i + 13 : i + 16]}"
        f"-{_VARIANT[int(raw[i + 16], 16)]}{raw[i + 17 : i + 20]}-{raw[i + 20 : i + 32]}"
        for i in range(0, 32 * count, 32)
    ]


# Ids and names: their repr is what Celery's saferepr writes (no quoting, no truncation).
_PLAIN = re.compile(r"[A-Za-z0-9_:.-]{0,100}")


def _argsrepr(args: tuple[Any, ...], envelope: _Envelope) -> str:
    """The message's ``argsrepr`` header, as Celery writes it. A few plain id strings
    (every step's message) are their ``repr`` - Celery's ``saferepr`` was most of a
    100,000-message publish."""
    if len(args) <= 4 and all(type(a) is str and _PLAIN.fullmatch(a) for a in args):
        return repr(args)
    return saferepr(args, envelope.repr_maxsize, maxlevels=envelope.repr_maxlevels)
