"""The outbox of ``emit`` nodes: each emitted event goes through the events service
(``triggers.events.event_receive``) exactly once, after the step that emitted it
committed; the sweeper processes the rows whose after-commit processing was lost.

Above ``events`` (which delivers through ``inbox``): the inbox only writes outbox rows.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from .events import event_receive
from .models import OutboxEvent

logger = logging.getLogger("notifyflow.inbox")


def outbox_process(*, instance_id: uuid.UUID, node_id: str) -> bool:
    """Process one emitted event through the events service, exactly once: the row is
    locked and marked processed in the transaction that starts the bound workflows."""
    with transaction.atomic():
        row = (
            OutboxEvent.objects.select_for_update(skip_locked=True)
            .filter(instance_id=instance_id, node_id=node_id, processed_at__isnull=True)
            .first()
        )
        if row is None:
            return False
        event_receive(
            name=row.name, event_id=row.event_id, context=row.context, subjects=row.subjects
        )
        row.processed_at = timezone.now()
        row.save(update_fields=["processed_at"])
    return True


def outbox_process_pending(*, older_than: datetime, batch: int) -> int:
    """The sweeper's share: outbox rows whose after-commit processing was lost."""
    pending = list(
        OutboxEvent.objects.filter(processed_at__isnull=True, created_at__lte=older_than)
        .order_by("created_at")
        .values_list("instance_id", "node_id")[:batch]
    )
    done = 0
    for instance_id, node_id in pending:
        try:
            done += outbox_process(instance_id=instance_id, node_id=node_id)
        except Exception:  # one bad row must not stop the sweep
            logger.exception("outbox %s:%s could not be processed", instance_id, node_id)
    return done
