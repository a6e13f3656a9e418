"""The deliverer's task: thin, sent by name (``outbox.DELIVER_TASK``) after commit by the
outbox, by itself for a retry within the broker horizon, and by the sweeper for what
those missed (a lost kick, a dead deliverer's expired lease, a retry hours away)."""

from __future__ import annotations

import logging

from celery import shared_task

from notifyflow import db

from . import delivery
from .outbox import DELIVER_TASK

logger = logging.getLogger("notifyflow.status_webhooks")


@shared_task(name=DELIVER_TASK, ignore_result=True)
def deliver_status_webhooks() -> dict[str, int]:
    """Deliver every due status webhook message (``delivery.deliver_due``)."""
    try:
        return delivery.deliver_due()
    except db.DATABASE_LOST as exc:
        # Claimed messages stay leased until the lease runs out; the sweeper kicks a
        # new pass then.
        logger.warning("status webhooks: database unavailable (%s)", exc)
        return {}
