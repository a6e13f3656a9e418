"""Handing instances to the broker. The database decides what is due; this only sends."""

from __future__ import annotations

import uuid

from django.conf import settings

from notifyflow.celery import enqueue_on_commit


def dispatch_on_commit(instance_id: uuid.UUID | str, *, countdown: float | None = None) -> None:
    """Send ``execute_node(instance_id)`` after commit, ``countdown`` seconds later.

    Callers never pass a countdown beyond NOTIFYFLOW_BROKER_HORIZON_S: longer waits stay
    in the database and the sweeper dispatches them when due.
    """
    from .tasks import execute_node

    if countdown is not None and countdown <= 0:
        countdown = None
    assert countdown is None or countdown <= settings.NOTIFYFLOW_BROKER_HORIZON_S
    enqueue_on_commit(execute_node, str(instance_id), countdown=countdown)
