"""Dropping a task's stale messages from a queue in bulk, instead of one by one.

A step's message whose instance was cancelled claims nothing, but a worker still takes
it off the queue, hands it to a pool process, runs the failing claim and acks it, one
after the other, while the rest of its lane waits behind them (the rule: "a cancelled
backlog costs nothing"; docs/measurements.md, "A cancelled backlog"). ``sift`` takes
them out in one pass. What is stale
is the caller's to say (``stale``: given the first arguments of the messages, the ones
whose messages may go); this module knows only the brokers.

- **Redis**: the oldest ``window`` messages of the queue's list are read (in pages, not
  blocking the server), their ids asked about, then one Lua script removes the stale
  ones from the same window - atomically, so a message pushed or popped meanwhile is
  neither lost nor duplicated. The script reads ``argsrepr`` in each envelope, which
  Celery and ``notifyflow.broker.publish`` write alike (``('<id>',)``).
- **RabbitMQ**: a queue cannot be edited, so its head is consumed by a consumer of our
  own with a large prefetch: stale messages are acked (gone), the others are held and
  given back unacked when the channel closes, which requeues them at their place in
  the queue. It stops after the messages that were ready when it began, after
  ``budget_s``, or once the prefetch window holds only live messages.
- Any other transport (the embedded ones): nothing is done.

Nothing here can lose a live message: Redis removes only what the caller called stale,
in one atomic step; RabbitMQ returns every message it did not ack.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from celery import Celery
from django.conf import settings

# Given ids (the first argument of the task's messages), those whose messages are stale.
StaleOf = Callable[[Collection[str]], Collection[str]]

# Messages read per LRANGE of the Redis pass; how long a sifter's lock lasts at most.
REDIS_PAGE = 5000
REDIS_LOCK_S = 30
# RabbitMQ: messages one sifting consumer may hold unacked (the live ones it has seen,
# given back at the end), and how many it asks about at once.
AMQP_PREFETCH = 5000
AMQP_BATCH = 1000
# A sifting consumer that receives nothing for this long stops.
AMQP_IDLE_S = 0.25

# ``argsrepr`` of a message whose one argument is a plain string: ``('<id>',)``.
_ARGSREPR = re.compile(r"\('([^'\"\\]{1,100})',\)")
_ENVELOPE_ID = re.compile(rb'"argsrepr": "\(\'([^\'"\\\\]{1,100})\',\)"')

# KEYS[1]: the list; ARGV[1]: the window (the oldest messages); ARGV[2]: what the task's
# envelopes contain (its name header); ARGV[3..]: the stale ids. The kept messages of
# the window go back in their order; the rest of the list is not touched.
_REDIS_SIFT = """
local window = tonumber(ARGV[1])
local marker = ARGV[2]
local stale = {}
for i = 3, #ARGV do stale[ARGV[i]] = true end
local items = redis.call('LRANGE', KEYS[1], -window, -1)
local keep = {}
for i = 1, #items do
  local item = items[i]
  local id = string.match(item, '"argsrepr": "%(\\'([^\\'"\\\\]+)\\',%)"')
  if not (id and stale[id] and string.find(item, marker, 1, true)) then
    keep[#keep + 1] = item
  end
end
local dropped = #items - #keep
if dropped > 0 then
  redis.call('LTRIM', KEYS[1], 0, -#items - 1)
  for i = 1, #keep, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(i + 999, #keep)))
  end
end
return dropped
"""


# KEYS[1]: a sifter's lock; ARGV[1]: the token it was taken with.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class SiftResult:
    """Messages of the task looked at, and how many of them were dropped."""

    scanned: int
    dropped: int


NOTHING = SiftResult(0, 0)


def sift(
    app: Celery,
    queue: str,
    *,
    task: str,
    stale: StaleOf,
    window: int,
    budget_s: float,
    every_s: float | None = None,
) -> SiftResult:
    """Drop from ``queue`` (on ``app``'s broker) the messages of ``task`` whose first
    argument ``stale`` names, among its oldest ``window`` messages, spending at most
    about ``budget_s``. With ``every_s``, at most one such sift of ``queue`` per
    ``every_s`` seconds among every process sharing the broker (Redis; on RabbitMQ the
    caller's own limit is all there is)."""
    kind = settings.NOTIFYFLOW_BROKER_KIND
    if kind == "redis":
        return _sift_redis(app, queue, task, stale, window, every_s)
    if kind == "amqp":
        return _sift_amqp(app, queue, task, stale, window, budget_s)
    return NOTHING


def _sift_redis(
    app: Any, queue: str, task: str, stale: StaleOf, window: int, every_s: float | None
) -> SiftResult:
    marker = f'"task": "{task}"'.encode()
    lock = f"notifyflow.sift:{queue}"
    token = uuid.uuid4().hex
    with app.producer_or_acquire() as producer, producer.channel.conn_or_acquire() as client:
        # A rate shared by every worker process: each one's own streak could otherwise
        # start a sift of the same queue every few seconds, all together.
        recent = f"notifyflow.sift-recent:{queue}"
        if every_s and not client.set(recent, "1", nx=True, px=max(1, int(every_s * 1000))):
            return NOTHING
        # One sifter per queue at a time: another one would only redo the same reads.
        if not client.set(lock, token, nx=True, ex=REDIS_LOCK_S):
            return NOTHING
        try:
            return _sift_redis_list(client, queue, marker, stale, window)
        finally:
            # Only our own lock: one that outlived REDIS_LOCK_S may be another's now.
            client.eval(_RELEASE, 1, lock, token)


def _sift_redis_list(
    client: Any, queue: str, marker: bytes, stale: StaleOf, window: int
) -> SiftResult:
    ids: set[str] = set()
    scanned = 0
    # From the tail (BRPOP's end: the oldest first), a page at a time; the list moves
    # meanwhile, which only means a message seen twice or not at all.
    for end in range(-1, -window - 1, -REDIS_PAGE):
        start = max(end - REDIS_PAGE + 1, -window)
        page = client.lrange(queue, start, end)
        for item in page:
            if marker in item and (found := _ENVELOPE_ID.search(item)):
                scanned += 1
                ids.add(found.group(1).decode())
        if len(page) < end - start + 1:
            break
    if not ids:
        return SiftResult(scanned, 0)
    drop = sorted(set(stale(ids)))
    if not drop:
        return SiftResult(scanned, 0)
    dropped = client.eval(_REDIS_SIFT, 1, queue, window, marker, *drop)
    return SiftResult(scanned, int(dropped))


def _sift_amqp(
    app: Any, queue: str, task: str, stale: StaleOf, window: int, budget_s: float
) -> SiftResult:
    deadline = time.monotonic() + budget_s
    with app.connection_for_write() as conn:
        channel = conn.channel()
        try:
            ready = channel.queue_declare(queue=queue, passive=True).message_count
            target = min(ready, window)
            if target == 0:
                return NOTHING
            channel.basic_qos(0, min(target, AMQP_PREFETCH), False)
            sifter = _AmqpSifter(channel, task, stale)
            pending: list[Any] = []
            # py-amqp's own consumer: kombu's wraps each message in one more object.
            channel.basic_consume(queue=queue, callback=pending.append)
            while sifter.seen + len(pending) < target and time.monotonic() < deadline:
                try:
                    conn.drain_events(timeout=AMQP_IDLE_S)
                except TimeoutError:
                    break  # nothing more is coming (the window holds live messages)
                if len(pending) >= AMQP_BATCH:
                    found = sifter.batch(pending)
                    pending.clear()
                    if not found:
                        break  # a batch without a stale message: the backlog is live
            sifter.batch(pending)
        finally:
            # Closing the channel gives back every message not acked - the live ones
            # held, and any delivered after the last batch - in their place.
            channel.close()
    return SiftResult(sifter.scanned, sifter.dropped)


class _AmqpSifter:
    """Acks the stale messages of each batch: while no live message is held, a run of
    stale ones with one ``multiple`` ack (one frame for hundreds: acking each one was
    most of the time), then one by one."""

    def __init__(self, channel: Any, task: str, stale: StaleOf) -> None:
        self.channel = channel
        self.task = task
        self.stale = stale
        self.holding = False
        self.seen = self.scanned = self.dropped = 0

    def batch(self, messages: list[Any]) -> int:
        """Ack the stale ones among ``messages`` (in delivery order): how many."""
        ids: dict[int, str] = {}
        for index, message in enumerate(messages):
            headers = message.properties.get("application_headers") or {}
            found = _ARGSREPR.fullmatch(str(headers.get("argsrepr", "")))
            if headers.get("task") == self.task and found:
                ids[index] = found.group(1)
        self.seen += len(messages)
        self.scanned += len(ids)
        gone = set(self.stale(set(ids.values()))) if ids else set()
        dropped = self.dropped
        run_end = None  # the last tag of a run of stale messages not acked yet
        for index, message in enumerate(messages):
            tag = message.delivery_tag
            if ids.get(index) in gone:
                self.dropped += 1
                if self.holding:
                    self.channel.basic_ack(tag)
                else:
                    run_end = tag
                continue
            if run_end is not None:
                self.channel.basic_ack(run_end, multiple=True)
                run_end = None
            self.holding = True
        if run_end is not None:
            self.channel.basic_ack(run_end, multiple=True)
        return self.dropped - dropped
