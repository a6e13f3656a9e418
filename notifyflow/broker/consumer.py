"""The worker's consumer without Celery's Gossip step (``CELERY_WORKER_CONSUMER``).

Gossip keeps a worker's picture of the other workers for elections and clock sync over
the broker's fanout; NotifyFlow uses neither (the database orders and fences the work).
And on every broker connection loss Celery's Gossip step logged a traceback: the
consumer restarts its steps after dropping the connection, and Gossip's stop closes its
channel through ``kombu.common.ignore_errors(None, ...)``, which fails with
``AttributeError: 'NoneType' object has no attribute 'connection_errors'`` ("Error on
restarting Gossip"). Without the step there is nothing to log; the worker reconnects
as before. ``NOTIFYFLOW_WORKER_GOSSIP=1`` keeps Celery's consumer as it is.
"""

from __future__ import annotations

from celery.worker.consumer import Consumer as CeleryConsumer

GOSSIP_STEP = "celery.worker.consumer.gossip:Gossip"


class Consumer(CeleryConsumer):
    # Read by the ``election`` remote-control command (set by the Gossip step otherwise).
    gossip = None

    class Blueprint(CeleryConsumer.Blueprint):
        default_steps = [s for s in CeleryConsumer.Blueprint.default_steps if s != GOSSIP_STEP]
