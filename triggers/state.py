"""The trigger-instance state machine: one table, one function that applies it."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection, transaction
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
    also: list[tuple[str, list[Any]]] | None = None,
) -> bool:
    """Move an instance from ``from_status`` to ``to_status`` and write the audit row.

    The UPDATE re-checks ``from_status`` (and ``lease_token`` when given, which fences
    out a worker whose lease was recovered) and any extra ``where`` conditions, in the
    same transaction as the audit row. Returns False, writing nothing, when the row no
    longer matches. Raises IllegalTransition for a pair not in ALLOWED_TRANSITIONS.

    ``also`` (PostgreSQL only): further data-modifying statements, as (sql, params),
    executed in the same statement whatever the outcome; they may refer to ``moved``
    (the updated row, empty when the transition did not apply).
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
                                         reason=reason, actor=actor, now=now,
                                         also=also) is not None
    assert not also, "extra statements are for the PostgreSQL path"
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


_FIELDS = {f.name: f for f in TriggerInstance._meta.concrete_fields}
_FIELDS["pk"] = TriggerInstance._meta.pk
_OPERATORS = {"": "=", "lte": "<=", "lt": "<", "gte": ">=", "gt": ">"}
_update_sql_cache: dict[tuple, str] = {}


def update_sql(conditions: dict[str, Any], values: dict[str, Any]) -> tuple[str, list[Any]]:
    """``UPDATE triggerinstance SET values WHERE conditions`` as SQL and parameters.

    Built by hand and cached by shape (the ORM's compiler was ~14% of a step); values go
    through each field's own ``get_db_prep_*`` so JSON, UUID and datetimes adapt as the
    ORM would. Conditions are ``field`` or ``field__lte``-style lookups.
    """
    shape = (tuple(conditions), tuple(values))
    sql = _update_sql_cache.get(shape)
    if sql is None:
        sets = ", ".join(f'"{_FIELDS[name].column}" = %s' for name in values)
        wheres = []
        for lookup in conditions:
            name, _, op = lookup.partition("__")
            column = f'"{_FIELDS[name].column}"'
            if name == "status" and "pk" in conditions:
                # Every transition is by primary key. Written plainly, the status test
                # lets the planner pick a partial index (status = 'enqueued' /
                # 'processing') whenever statistics call it empty, and then walk every
                # due row to find this one (seen in bench/RESULTS.md). As an expression
                # it implies no partial index, so the plan is always the primary key.
                column = f"({column} || '')"
            wheres.append(f"{column} {_OPERATORS[op]} %s")
        sql = f'UPDATE "{TriggerInstance._meta.db_table}" SET {sets} WHERE {" AND ".join(wheres)}'
        _update_sql_cache[shape] = sql
    params = [_FIELDS[name].get_db_prep_save(value, connection)
              for name, value in values.items()]
    params += [_FIELDS[lookup.partition("__")[0]].get_db_prep_value(value, connection)
               for lookup, value in conditions.items()]
    return sql, params


_AUDIT_INSERT = (
    "INSERT INTO triggers_triggerstatuschange"
    " (instance_id, from_status, to_status, reason, actor, at)"
    " SELECT id, %s, %s, %s, %s, %s FROM moved"
)


def _transition_one_statement(
    conditions: dict[str, Any], values: dict[str, Any], *, instance_id: Any,
    from_status: str, to_status: str, reason: str, actor: str, now: Any,
    returning: str = "id", select: str = "SELECT id FROM moved",
    also: list[tuple[str, list[Any]]] | None = None,
) -> tuple | None:
    """PostgreSQL: the conditional UPDATE and its audit row in one statement (a
    data-modifying CTE): one round trip and atomic without an explicit transaction."""
    update, params = update_sql(conditions, values)
    ctes = [f"moved AS ({update} RETURNING {returning})", f"audit AS ({_AUDIT_INSERT})"]
    params += [from_status, to_status, reason[:2000], actor[:200], now]
    for index, (statement, extra) in enumerate(also or ()):
        ctes.append(f"also_{index} AS ({statement})")
        params += extra
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} {select}", params)
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
