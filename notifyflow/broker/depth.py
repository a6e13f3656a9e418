"""How many messages wait in a queue, not yet delivered to any worker.

The sweeper asks before it re-sends a message it believes lost: a message dispatched
long ago may only be waiting behind a deep backlog, and re-sending it then adds load
exactly when the workers are behind (executions/sweeper.py, ``redispatch_due``).

- **Redis**: the length of the queue's list (``LLEN``), every queue in one pipelined
  round trip. A message a worker took and holds (prefetched, a countdown it waits on)
  is no longer in the list.
- **RabbitMQ**: the queue's ready messages (a passive ``queue.declare``); a queue that
  does not exist holds none.
- Any other transport (the embedded ones): ``None``, the broker cannot say.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from celery import Celery
from django.conf import settings

logger = logging.getLogger("notifyflow.broker")


def ready_messages(app: Celery, queues: Collection[str]) -> dict[str, int] | None:
    """Messages waiting in each of ``queues`` on ``app``'s broker; ``None`` when the
    broker cannot say (an embedded transport) or could not be asked."""
    kind = settings.NOTIFYFLOW_BROKER_KIND
    try:
        if kind == "redis":
            return _redis(app, list(queues))
        if kind == "amqp":
            return _amqp(app, list(queues))
    except Exception as exc:  # noqa: BLE001 - advisory: the caller falls back to its rule
        logger.warning("queue depth of %s not read: %r", sorted(queues), exc)
    return None


def _redis(app: Celery, queues: list[str]) -> dict[str, int]:
    with app.producer_or_acquire() as producer, producer.channel.conn_or_acquire() as client:
        pipe = client.pipeline(transaction=False)
        for queue in queues:
            pipe.llen(queue)
        return dict(zip(queues, (int(n) for n in pipe.execute()), strict=True))


def _amqp(app: Celery, queues: list[str]) -> dict[str, int]:
    from amqp.exceptions import NotFound

    counts: dict[str, int] = {}
    with app.connection_for_read() as conn:
        for queue in queues:
            # A channel each: a queue that does not exist closes the channel it was
            # asked on.
            channel = conn.channel()
            try:
                counts[queue] = channel.queue_declare(queue=queue, passive=True).message_count
            except NotFound:
                counts[queue] = 0
            finally:
                if channel.is_open:
                    channel.close()
    return counts
