"""Retention: deleting finished instances and their history (SPEC §10).

History tables (step logs, status changes, event records) reject UPDATE and DELETE in
PostgreSQL (triggers/migrations/0010); this is the one documented way past that guard:
each batch runs in its own transaction with ``SET LOCAL notifyflow.purge = on``, which
the guard's trigger function checks.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from notifyflow import db
from status_webhooks.models import InstanceSequence, MessageStatus, WebhookMessage

from .event_models import EventRecord
from .gate_models import ThrottleCounter
from .models import TERMINAL_STATUSES, TriggerInstance

logger = logging.getLogger("notifyflow.retention")


def allow_purge() -> None:
    """Inside a transaction: this transaction may delete history rows (the guard's
    trigger functions check the setting; nothing to do on SQLite, which has no guard)."""
    db.set_local("notifyflow.purge", "on")


def finished_purge(*, older_than: timedelta, batch: int = 500) -> dict[str, int]:
    """Delete instances that finished (completed, failed, cancelled) more than
    ``older_than`` ago, with their step logs, deliveries, audit rows, inbox, interests,
    outbox and status-event sequence; event records received before the same cutoff;
    status webhook messages created before it that are no longer pending (with
    their attempts; a pending one is still owed to its endpoint); and throttle counters
    last written before it whose window has passed (``throttle_counters_purge``).

    Batches of ``batch`` instances, each in its own short transaction, oldest first, so
    a purge under load never holds many locks or a long transaction. Returns counts.

    Each batch first locks its instances (``FOR UPDATE SKIP LOCKED``, re-checking that
    they are still finished): an operator's retry that moved one meanwhile, or holds it
    now, keeps it out of the batch (a later purge takes it if it finishes again), and a
    retry that comes after the lock waits and then finds the instance gone (404) -
    never a history row inserted for an instance being deleted (IntegrityError).
    """
    cutoff = timezone.now() - older_than
    instances = events = 0
    while True:
        with transaction.atomic():
            allow_purge()
            ids = list(
                TriggerInstance.objects.filter(status__in=TERMINAL_STATUSES, finished_at__lt=cutoff)
                .select_for_update(skip_locked=True)
                .order_by("finished_at")
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                break
            # The ORM's collector deletes the dependent history rows (CASCADE) first.
            TriggerInstance.objects.filter(pk__in=ids).delete()
            InstanceSequence.objects.filter(instance_id__in=ids).delete()
            instances += len(ids)
    while True:
        with transaction.atomic():
            allow_purge()
            record_ids = list(
                EventRecord.objects.filter(received_at__lt=cutoff)
                .order_by("received_at")
                .values_list("id", flat=True)[:batch]
            )
            if not record_ids:
                break
            EventRecord.objects.filter(pk__in=record_ids).delete()
            events += len(record_ids)
    messages = _webhook_messages_purge(cutoff=cutoff, batch=batch)
    counters = throttle_counters_purge(cutoff=cutoff, batch=batch)
    logger.info(
        "purged %d finished instances, %d event records, %d status webhook messages and "
        "%d expired throttle counters",
        instances,
        events,
        messages,
        counters,
    )
    return {
        "instances": instances,
        "event_records": events,
        "webhook_messages": messages,
        "throttle_counters": counters,
    }


def throttle_counters_purge(*, cutoff: datetime, batch: int = 500) -> int:
    """Delete the throttle counters last written before ``cutoff`` whose every hit has
    also left their window (``updated_at`` + ``window_ms``, the window of the node that
    last wrote them): such a counter counts nothing - the next pass of its key would
    find the window empty - but one per recipient and key piled up for ever. Returns
    how many went.

    A pass that writes a counter meanwhile moves its ``updated_at`` past ``cutoff``,
    and the DELETE re-checks that under the row's lock: a counter in use is never
    deleted (the next pass of a deleted key simply starts a new one)."""
    now = timezone.now()
    done = 0
    after = 0
    while True:
        rows = list(
            # A daily job, the one reader by age alone: a scan, not an index of its own.
            ThrottleCounter.objects.filter(updated_at__lt=cutoff, pk__gt=after)
            .order_by("pk")
            .values_list("pk", "updated_at", "window_ms")[:batch]
        )
        if not rows:
            return done
        after = rows[-1][0]
        expired = [
            pk
            for pk, updated_at, window_ms in rows
            if updated_at + timedelta(milliseconds=window_ms) < now
        ]
        if expired:
            deleted, _ = ThrottleCounter.objects.filter(
                pk__in=expired, updated_at__lt=cutoff
            ).delete()
            done += deleted


def _webhook_messages_purge(*, cutoff: datetime, batch: int) -> int:
    done = 0
    while True:
        with transaction.atomic():
            # A daily job, the one reader by age alone: a scan, not an index of its own.
            message_ids = list(
                WebhookMessage.objects.filter(created_at__lt=cutoff)
                .exclude(status=MessageStatus.PENDING)
                .order_by("created_at")
                .values_list("id", flat=True)[:batch]
            )
            if not message_ids:
                return done
            WebhookMessage.objects.filter(pk__in=message_ids).delete()
            done += len(message_ids)
