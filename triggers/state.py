"""The trigger-instance state machine: one table, one function that applies it."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction
from django.db.models import sql
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
    if connection.vendor == "postgresql":
        return _transition_one_statement(conditions, values, instance_id=instance_id,
                                         from_status=from_status, to_status=to_status,
                                         reason=reason, actor=actor, now=now) is not None
    # savepoint=False: inside the engine's step transaction this is all-or-nothing with
    # it anyway, and a savepoint costs two round trips.
    with transaction.atomic(savepoint=False):
        if TriggerInstance.objects.filter(**conditions).update(**values) != 1:
            return False
        TriggerStatusChange.objects.create(
            instance_id=instance_id, from_status=from_status, to_status=to_status,
            reason=reason[:2000], actor=actor[:200],
        )
    return True


def update_sql(conditions: dict[str, Any], values: dict[str, Any]) -> tuple[str, tuple]:
    """The ORM's own UPDATE statement (with its type adaptation, e.g. JSON) as SQL."""
    query = TriggerInstance.objects.filter(**conditions).query.chain(sql.UpdateQuery)
    query.add_update_values(values)
    return query.get_compiler(connection=connection).as_sql()


_AUDIT_INSERT = (
    "INSERT INTO triggers_triggerstatuschange"
    " (instance_id, from_status, to_status, reason, actor, at)"
    " SELECT id, %s, %s, %s, %s, %s FROM moved"
)


def _transition_one_statement(
    conditions: dict[str, Any], values: dict[str, Any], *, instance_id: Any,
    from_status: str, to_status: str, reason: str, actor: str, now: Any,
    returning: str = "id", select: str = "SELECT id FROM moved",
) -> tuple | None:
    """PostgreSQL: the conditional UPDATE and its audit row in one statement (a
    data-modifying CTE): one round trip and atomic without an explicit transaction."""
    update, params = update_sql(conditions, values)
    statement = (f"WITH moved AS ({update} RETURNING {returning}),"
                 f" audit AS ({_AUDIT_INSERT}) {select}")
    audit = (from_status, to_status, reason[:2000], actor[:200], now)
    with connection.cursor() as cursor:
        cursor.execute(statement, (*params, *audit))
        return cursor.fetchone()


def transition_returning(
    *, instance_id: uuid.UUID | str, from_status: str, to_status: str, reason: str,
    actor: str, where: dict[str, Any] | None = None, updates: dict[str, Any] | None = None,
    select: str,
) -> tuple | None:
    """PostgreSQL only: like ``transition`` but returns the row of ``select`` (a query over
    the CTE ``moved``, which holds the updated row's columns), or None if nothing moved.
    Used by the claim, which needs the row it just took."""
    check_transition(from_status, to_status)
    now = timezone.now()
    conditions = {"pk": instance_id, "status": from_status, **(where or {})}
    values = {"status": to_status, "updated_at": now, **(updates or {})}
    return _transition_one_statement(conditions, values, instance_id=instance_id,
                                     from_status=from_status, to_status=to_status,
                                     reason=reason, actor=actor, now=now, returning="*",
                                     select=select)
