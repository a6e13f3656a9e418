"""Retention: deleting finished instances and their history (docs/operations.md#retention).

History tables (step logs, status changes, event records) reject UPDATE and DELETE in
PostgreSQL (triggers/migrations/0010); this is the one documented way past that guard:
each batch runs in its own transaction with ``SET LOCAL notifyflow.purge = on``, which
the guard's trigger function checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from notifyflow import db
from status_webhooks.models import InstanceSequence, MessageStatus, WebhookMessage

from .models import TERMINAL_STATUSES, EventRecord, TriggerInstance

logger = logging.getLogger("notifyflow.retention")

# What apps above this one purge with the finished instances: name -> a function of
# (cutoff, batch) returning how many rows went. The gates register their expired
# throttle counters (gates/apps.py), so this layer names none of their tables.
PURGES: dict[str, Callable[..., int]] = {}


def purge_register(*, name: str, purge: Callable[..., int]) -> None:
    """Run ``purge(cutoff=..., batch=...)`` in every ``finished_purge``, counted as ``name``."""
    PURGES[name] = purge


def allow_purge() -> None:
    """Inside a transaction: this transaction may delete history rows (the guard's
    trigger functions check the setting; nothing to do on SQLite, which has no guard)."""
    db.set_local("notifyflow.purge", "on")


def finished_purge(*, older_than: timedelta, batch: int = 500) -> dict[str, int]:
    """Delete instances that finished (completed, failed, cancelled) more than
    ``older_than`` ago, with their step logs, deliveries, audit rows, inbox, interests,
    outbox and status-event sequence; event records received before the same cutoff;
    status webhook messages created before it that are no longer pending (with
    their attempts; a pending one is still owed to its endpoint); and what the apps
    above registered (``purge_register``: the gates' expired throttle counters).

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
    counts = {"instances": instances, "event_records": events, "webhook_messages": messages}
    for name, purge in PURGES.items():
        counts[name] = purge(cutoff=cutoff, batch=batch)
    logger.info("purged %s", ", ".join(f"{count} {name}" for name, count in counts.items()))
    return counts


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
