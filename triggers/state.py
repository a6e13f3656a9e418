"""The trigger-instance state machine: one table, one function that applies it."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from .models import TriggerInstance, TriggerStatus, TriggerStatusChange

S = TriggerStatus

# (from, to) -> what it means. Nothing else is allowed.
ALLOWED_TRANSITIONS: dict[tuple[str, str], str] = {
    (S.ENQUEUED, S.PROCESSING): "claimed by a worker",
    (S.PROCESSING, S.ENQUEUED): "step done, delay or retry scheduled, or lease recovered",
    (S.PROCESSING, S.COMPLETED): "no next node",
    (S.ENQUEUED, S.FAILED): "failed before it could run",
    (S.PROCESSING, S.FAILED): "retries exhausted or permanent error",
    # The only way out of failed: an operator's retry (audited with the operator).
    (S.FAILED, S.ENQUEUED): "retried by an operator",
}


class IllegalTransition(Exception):
    pass


def check_transition(from_status: str, to_status: str) -> None:
    if (from_status, to_status) not in ALLOWED_TRANSITIONS:
        raise IllegalTransition(f"{from_status} -> {to_status} is not an allowed transition")


def transition(
    *,
    instance_id: uuid.UUID | str,
    from_status: str,
    to_status: str,
    reason: str,
    actor: str,
    lease_token: uuid.UUID | None = None,
    where: dict[str, Any] | None = None,
    updates: dict[str, Any] | None = None,
) -> bool:
    """Move an instance from ``from_status`` to ``to_status`` and write the audit row.

    The UPDATE re-checks ``from_status`` (and ``lease_token`` when given, which fences
    out a worker whose lease was recovered) and any extra ``where`` conditions, in the
    same transaction as the audit row. Returns False, writing nothing, when the row no
    longer matches. Raises IllegalTransition for a pair not in ALLOWED_TRANSITIONS.
    """
    check_transition(from_status, to_status)
    now = timezone.now()
    conditions = {"pk": instance_id, "status": from_status, **(where or {})}
    if lease_token is not None:
        conditions["lease_token"] = lease_token
    values = {"status": to_status, "updated_at": now, **(updates or {})}
    if to_status in (S.COMPLETED, S.FAILED):
        values.setdefault("finished_at", now)
    if from_status == S.PROCESSING and to_status != S.PROCESSING:
        values.update(lease_token=None, locked_by="", locked_until=None)
    with transaction.atomic():
        if TriggerInstance.objects.filter(**conditions).update(**values) != 1:
            return False
        TriggerStatusChange.objects.create(
            instance_id=instance_id, from_status=from_status, to_status=to_status,
            reason=reason[:2000], actor=actor[:200],
        )
    return True
