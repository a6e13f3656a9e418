"""Instances parked at a gate: woken when the gate opens, and a batch's
parked members completed, set-based, when their batch closes.

A parked instance is enqueued and due at its deadline (``wait_deadline``), holding no
worker; the sweeper dispatches it then. These let the event that opens the gate - a
batch closing, a flush - make it due at once instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from status_webhooks.outbox import record

from ..dispatch import dispatch_many_on_commit
from ..models import ParkedOn, TriggerInstance, TriggerStatus, TriggerStatusChange
from .machine import check_transition, finished_event

S = TriggerStatus
_CHUNK = 1000


def wake_parked(*, instance_ids: Sequence[uuid.UUID | str], parked_on: str) -> int:
    """Instances among ``instance_ids`` still parked on ``parked_on`` become due now and
    are dispatched after commit (a duplicate message is a harmless no-op). Returns how
    many were woken."""
    now = timezone.now()
    woken: list[tuple[uuid.UUID, str]] = []
    for start in range(0, len(instance_ids), _CHUNK):
        rows = TriggerInstance.objects.filter(
            pk__in=instance_ids[start : start + _CHUNK],
            status=S.ENQUEUED,
            parked_on=parked_on,
            available_at__gt=now,
        )
        chunk = list(rows.values_list("pk", "lane"))
        if chunk:
            TriggerInstance.objects.filter(
                pk__in=[pk for pk, _ in chunk], status=S.ENQUEUED, parked_on=parked_on
            ).update(available_at=now, dispatched_at=now, updated_at=now)
            woken += chunk
    dispatch_many_on_commit(woken)
    return len(woken)


def complete_parked(
    *,
    instance_ids: Sequence[uuid.UUID | str],
    node_id: str,
    reason: str,
    actor: str,
    parked_on: str = ParkedOn.BATCH,
) -> int:
    """enqueued -> completed for the instances among ``instance_ids`` still parked on
    ``parked_on`` at ``node_id`` (a batch's members, when it closes), with their audit rows:
    per 1,000 ids, lock the rows still parked, update them and write the audit rows in
    one transaction. A member cancelled or released meanwhile is left alone. Returns how
    many were completed."""
    check_transition(S.ENQUEUED, S.COMPLETED)
    completed = 0
    for start in range(0, len(instance_ids), _CHUNK):
        chunk = instance_ids[start : start + _CHUNK]
        now = timezone.now()
        with transaction.atomic():
            rows = list(
                # Locks the instances only (the workflow's key is read, not locked).
                TriggerInstance.objects.select_for_update(of=("self",))
                .order_by("pk")
                .filter(
                    pk__in=chunk,
                    status=S.ENQUEUED,
                    parked_on=parked_on,
                    current_node_id=node_id,
                )
                .values_list("pk", "workflow__key", "idempotency_key", "recipient_id")
            )
            if not rows:
                continue
            ids = [row[0] for row in rows]
            TriggerInstance.objects.filter(pk__in=ids).update(
                status=S.COMPLETED,
                current_node_id=None,
                parked_on=ParkedOn.NONE,
                wait_deadline=None,
                updated_at=now,
                finished_at=now,
            )
            TriggerStatusChange.objects.bulk_create(
                TriggerStatusChange(
                    instance_id=instance_id,
                    from_status=S.ENQUEUED,
                    to_status=S.COMPLETED,
                    reason=reason[:2000],
                    actor=actor[:200],
                    at=now,
                )
                for instance_id in ids
            )
            # Their instance.completed events, set-based, in the same transaction.
            record(events=[finished_event(row, S.COMPLETED, reason) for row in rows], at=now)
        completed += len(ids)
    return completed
