"""Every write of a trigger instance's state, in one place.

One table of allowed transitions; ``transition()`` is the only writer of ``status`` and
of the audit rows (``TriggerStatusChange``), and the claim, the requeue after a step and
the operator actions are built on it. Updates are fenced: they re-check the status (and
the lease token of the worker that holds the instance), so a stale writer changes
nothing and learns so from the return value.

On PostgreSQL a transition is one statement: the conditional UPDATE, its audit INSERT
and any ``also`` statements of the caller (the step's log row, its delivery record) as
data-modifying CTEs - one round trip and atomic without an explicit transaction
(bench/RESULTS.md: 7 -> 3 statements per step). Elsewhere (SQLite, ``make run``) the
same writes go through the ORM in one transaction; both paths run in CI.

Creation (``create_or_find`` for a POST, ``create_bulk`` for up to 1,000 at once) is
``INSERT ... ON CONFLICT DO NOTHING`` with the audit and interest rows as CTEs: a taken
key inserts nothing and raises nothing, and the caller answers with the existing row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models.sql import InsertQuery
from django.utils import timezone

from notifyflow import db
from workflows.models import Workflow

from .dispatch import dispatch_on_commit
from .inbox_models import Interest
from .models import TriggerInstance, TriggerStatus, TriggerStatusChange
from .selectors import by_key_sql, instance_by_key, instance_from_row

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
    # Not a change of status, but an operator's intervention worth the audit trail.
    (S.ENQUEUED, S.ENQUEUED): "made due now by an operator",
    # Cancellation (API, admin): a pending delay, retry or wait never runs; a running
    # step finishes and records its delivery, but its fenced outcome cannot advance.
    (S.ENQUEUED, S.CANCELLED): "cancelled while waiting",
    (S.PROCESSING, S.CANCELLED): "cancelled while a step ran",
}

# Creation is audited too, as none -> enqueued (``from_status`` empty).
CREATED = ("", S.ENQUEUED)


class IllegalTransition(Exception):
    """A (from, to) pair outside the table: a programming error, never user input."""


def check_transition(from_status: str, to_status: str) -> None:
    if (from_status, to_status) not in ALLOWED_TRANSITIONS:
        raise IllegalTransition(f"{from_status} -> {to_status} is not an allowed transition")


@dataclass(frozen=True)
class Statement:
    """A data-modifying SQL statement run inside a transition's statement (PostgreSQL).
    It may refer to ``moved``: the updated row, empty when the transition did not apply."""

    sql: str
    params: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Join:
    """Columns of another table read in the claim's statement (PostgreSQL): ``columns``
    are select expressions with aliases, which become attributes of the claimed row."""

    clause: str
    columns: Sequence[str]


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
    also: Sequence[Statement] = (),
    details: dict[str, Any] | None = None,
    durable: bool = False,
) -> bool:
    """Move an instance from ``from_status`` to ``to_status`` and write the audit row.

    The UPDATE re-checks ``from_status`` (and ``lease_token`` when given, which fences
    out a worker whose lease was recovered) and any extra ``where`` lookups, atomically
    with the audit row. Returns False, writing nothing, when the row no longer matches.
    Raises IllegalTransition for a pair not in ALLOWED_TRANSITIONS.

    ``also`` (PostgreSQL only): further statements executed in the same statement
    whatever the outcome (callers on other databases write those rows themselves).
    ``details`` goes into the audit row (what an operator changed).

    ``durable`` (PostgreSQL): the statement's own transaction commits synchronously
    whatever the session's ``synchronous_commit`` (workers default to off): it sets it
    for that transaction only, inside the statement, so an autocommit call stays one
    round trip (no BEGIN / SET LOCAL / COMMIT). Inside an outer transaction it applies
    to that transaction's COMMIT.
    """
    conditions, values, audit = _prepare(
        instance_id, from_status, to_status, reason, actor, lease_token, where, updates
    )
    audit["details"] = details
    if connection.vendor == "postgresql":
        # Always one row, so set_config runs whether or not the transition applied (the
        # ``also`` rows, a delivery's 'sent' record, are written either way).
        select = "SELECT EXISTS (SELECT 1 FROM moved)" + (_DURABLE if durable else "")
        sql, params = _statement(conditions, values, audit, also, select)
        with connection.cursor() as cursor:
            # By primary key: prepared (notifyflow/db.py).
            return bool(db.execute(cursor, sql, params).fetchone()[0])
    if also:
        raise ValueError("extra statements run only inside PostgreSQL's single statement")
    # savepoint=False: inside the engine's step transaction this is all-or-nothing with
    # it anyway, and a savepoint costs two round trips.
    with transaction.atomic(savepoint=False):
        if TriggerInstance.objects.filter(**conditions).update(**values) != 1:
            return False
        TriggerStatusChange.objects.create(**audit)
    return True


def claim(
    *, instance_id: uuid.UUID | str, worker: str, now: datetime, join: Join | None = None
) -> TriggerInstance | None:
    """enqueued -> processing for a due instance, under a new lease; None if it is not
    claimable (already claimed, finished, or not due yet).

    The conditional UPDATE re-checks status and due time, so any number of workers
    racing on one instance get exactly one winner; an instance of a paused workflow is
    not claimable. On PostgreSQL the claim, its audit row and the read of the row (plus
    ``join``'s columns) are one statement.
    """
    conditions, values, audit = _prepare(
        instance_id,
        S.ENQUEUED,
        S.PROCESSING,
        "claimed",
        worker or "engine",
        None,
        {"available_at__lte": now},
        {
            "lease_token": uuid.uuid4(),
            "locked_by": worker[:200],
            "locked_until": now + timedelta(seconds=settings.NOTIFYFLOW_LEASE_S),
        },
    )
    if connection.vendor == "postgresql":
        # The model's columns by name, not ``*``: a prepared statement's result type
        # must not change under it when a migration adds a column.
        columns = ", ".join([*(f"moved.{c}" for c in _COLUMNS), *(join.columns if join else ())])
        select = f"SELECT {columns} FROM moved {join.clause if join else ''}"
        sql, params = _statement(
            conditions, values, audit, (), select, returning=_RETURNING, extra_where=_NOT_PAUSED
        )
        with connection.cursor() as cursor:
            # By primary key: prepared (notifyflow/db.py).
            row = db.execute(cursor, sql, params).fetchone()
        if row is None:
            return None
        count = len(_CONCRETE)
        conn = db.current()
        instance = TriggerInstance.from_db(
            conn.alias,
            [f.attname for f in _CONCRETE],
            [_from_db(f, value, conn) for f, value in zip(_CONCRETE, row[:count], strict=True)],
        )
        for column, value in zip(join.columns if join else (), row[count:], strict=True):
            setattr(instance, column.rpartition(" AS ")[2], value)
        return instance
    with transaction.atomic(savepoint=False):
        claimable = TriggerInstance.objects.filter(**conditions).exclude(workflow__is_paused=True)
        if claimable.update(**values) != 1:
            return None
        TriggerStatusChange.objects.create(**audit)
    return TriggerInstance.objects.get(pk=instance_id)


def requeue(
    *,
    instance_id: uuid.UUID | str,
    lease_token: uuid.UUID | None,
    due: datetime,
    now: datetime,
    reason: str,
    actor: str,
    updates: dict[str, Any],
    also: Sequence[Statement] = (),
    durable: bool = False,
) -> bool:
    """processing -> enqueued, due at ``due``. The message goes to the broker after
    commit, unless ``due`` is beyond the broker horizon: then the sweeper sends it."""
    countdown = (due - now).total_seconds()
    in_broker = countdown <= settings.NOTIFYFLOW_BROKER_HORIZON_S
    moved = transition(
        instance_id=instance_id,
        from_status=S.PROCESSING,
        to_status=S.ENQUEUED,
        reason=reason,
        actor=actor,
        lease_token=lease_token,
        also=also,
        updates={**updates, "available_at": due, "dispatched_at": now if in_broker else None},
        durable=durable,
    )
    if moved and in_broker:
        dispatch_on_commit(instance_id, countdown=countdown)
    return moved


def cancel(*, instance_id: uuid.UUID | str, from_status: str, reason: str, actor: str) -> bool:
    """enqueued/processing -> cancelled, cursor cleared. Not fenced on the lease: a step
    running now still finishes and records its delivery, but its outcome - fenced on
    the lease - can no longer advance the instance."""
    return transition(
        instance_id=instance_id,
        from_status=from_status,
        to_status=S.CANCELLED,
        reason=reason,
        actor=actor,
        updates={"current_node_id": None},
    )


def create(*, instance: TriggerInstance, actor: str, interests: Sequence[str] = ()) -> None:
    """INSERT a new instance with its creation audit row (none -> enqueued) and its
    interest rows, atomically: an event posted the moment this returns reaches it.

    On PostgreSQL one statement (the ORM's own INSERT, wrapped in a CTE): a POST stays
    one round trip. Raises IntegrityError for a taken (workflow, idempotency_key).
    """
    if connection.vendor != "postgresql":
        with transaction.atomic(savepoint=False):
            instance.save(force_insert=True)
            TriggerStatusChange.objects.create(
                instance=instance,
                from_status=CREATED[0],
                to_status=CREATED[1],
                reason="created",
                actor=actor[:200],
                at=instance.created_at,
            )
            Interest.objects.bulk_create(
                [Interest(instance=instance, subject=subject) for subject in interests]
            )
        return
    query = InsertQuery(TriggerInstance)
    query.insert_values(TriggerInstance._meta.concrete_fields, [instance])
    [(insert, params)] = query.get_compiler(connection=connection).as_sql()
    sql = (
        f'WITH created AS ({insert} RETURNING "{TriggerInstance._meta.pk.column}"), '
        f"audit AS ({_AUDIT_INSERT.replace('FROM moved', 'FROM created')}) "
    )
    params = [*params, *CREATED, "created", actor[:200], instance.created_at, None]
    if interests:
        pk = TriggerInstance._meta.pk.column
        sql += f'{_INTEREST_INSERT} SELECT "{pk}", subject FROM created, unnest(%s::text[]) subject'
        params.append(list(interests))
    else:
        sql += "SELECT 1"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    instance._state.adding = False
    instance._state.db = connection.alias


@dataclass(frozen=True)
class NewInstance:
    """One instance for ``create_bulk``: what differs between the instances of a batch
    (everything else is the same for all: enqueued at the entry node, due now)."""

    id: uuid.UUID
    workflow_id: int
    workflow_version_id: int
    idempotency_key: str
    payload: dict[str, Any]
    entry_node_id: str
    interests: Sequence[str] = ()
    # The API key that created it (scoped keys read only their own instances).
    created_by_key: str = ""


# The columns that differ per instance in ``create_bulk``'s statement (one array each).
_BULK_VARYING = (
    "id",
    "workflow_id",
    "workflow_version_id",
    "idempotency_key",
    "payload",
    "current_node_id",
)


def create_bulk(*, rows: Sequence[NewInstance], now: datetime, actor: str) -> set[uuid.UUID]:
    """INSERT many new instances, each enqueued at its entry node and due ``now``, with
    its creation audit row and interest rows, skipping any whose (workflow,
    idempotency_key) is taken. Returns the ids actually inserted; the others lost to a
    row that exists or to a concurrent writer (the INSERT waited for its transaction).
    Rows go in in (workflow, key) order, so concurrent calls with overlapping keys wait
    on each other in one order and never deadlock.

    On PostgreSQL one statement, whatever the number of rows: ``INSERT ... SELECT FROM
    unnest(<one array per differing column>) ON CONFLICT DO NOTHING RETURNING``, with
    the audit and interest INSERTs as CTEs over what it returned - atomic, one round
    trip, a handful of parameters. Columns that are the same for every row come from one
    model instance, so a new column with a default needs no change here. Elsewhere the
    ORM (``create``), one savepoint per instance inside one transaction.
    """
    if not rows:
        return set()
    template = as_model(rows[0], now)
    if connection.vendor != "postgresql":
        inserted: set[uuid.UUID] = set()
        with transaction.atomic():
            for row in rows:
                instance = as_model(row, now)
                try:
                    with transaction.atomic():
                        create(instance=instance, actor=actor, interests=row.interests)
                        # save() stamped its own times (auto_now): the batch's ``now``,
                        # as on PostgreSQL and as the caller answers.
                        TriggerInstance.objects.filter(pk=row.id).update(
                            created_at=now, updated_at=now
                        )
                        TriggerStatusChange.objects.filter(instance_id=row.id).update(at=now)
                except IntegrityError:
                    continue
                inserted.add(row.id)
        return inserted
    if len(rows) == 1:  # a POST: VALUES plans and runs faster than unnest (~0.3 ms)
        return _create_one(template, actor, rows[0].interests)
    sql = _bulk_insert_sql()
    # In the statement's order: the constant columns (SELECT list), then the arrays.
    params: list[Any] = [
        column.get_db_prep_save(getattr(template, column.attname), connection)
        for column in TriggerInstance._meta.concrete_fields
        if column.attname not in _BULK_VARYING
    ]
    params += [
        [row.id for row in rows],
        [row.workflow_id for row in rows],
        [row.workflow_version_id for row in rows],
        [row.idempotency_key for row in rows],
        [json.dumps(row.payload) for row in rows],
        [row.entry_node_id for row in rows],
    ]
    params += [*CREATED, "created", actor[:200], None]
    owners = [row.id for row in rows for _ in row.interests]
    params += [owners, [subject for row in rows for subject in row.interests]]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {found for (found,) in cursor.fetchall()}


def as_model(row: NewInstance, now: datetime) -> TriggerInstance:
    """``row`` as the model instance ``create_bulk`` inserts for it (unsaved)."""
    return TriggerInstance(
        id=row.id,
        workflow_id=row.workflow_id,
        workflow_version_id=row.workflow_version_id,
        idempotency_key=row.idempotency_key,
        payload=row.payload,
        status=S.ENQUEUED,
        current_node_id=row.entry_node_id,
        vars={},
        attempts=0,
        available_at=now,
        dispatched_at=now,
        created_at=now,
        updated_at=now,
        created_by_key=row.created_by_key[:100],
    )


def create_or_find(
    *, row: NewInstance, now: datetime, actor: str, workflow: Workflow
) -> tuple[bool, TriggerInstance | None]:
    """``create_bulk`` for one row, which also reads the instance that holds its key if
    that is taken: ``(True, None)`` inserted; ``(False, instance)`` the key's instance
    (``workflow`` and its version attached); ``(False, None)`` taken by a writer that
    committed while this ran (read it again).

    On PostgreSQL one statement - a POST of a new key or of a repeated one is one round
    trip: the INSERT ... ON CONFLICT DO NOTHING with its audit and interest rows, and
    the existing row read in the same statement when nothing was inserted.
    """
    if connection.vendor != "postgresql":
        if create_bulk(rows=[row], now=now, actor=actor):
            return True, None
        return False, instance_by_key(workflow=workflow, idempotency_key=row.idempotency_key)
    instance = as_model(row, now)
    params: list[Any] = [row.workflow_id, row.idempotency_key]
    params += [
        f.get_db_prep_save(getattr(instance, f.attname), connection)
        for f in TriggerInstance._meta.concrete_fields
    ]
    params += [*CREATED, "created", actor[:200], None]
    if row.interests:
        params.append(list(row.interests))
    sql = _create_or_find_sql(bool(row.interests))
    with connection.cursor() as cursor:
        # Prepared: only unique-key probes, and planning the CTEs was most of a
        # POST's PostgreSQL time.
        found = db.execute(cursor, sql, params).fetchone()
    if found[0] is not None:
        return True, None
    existing = found[1:]
    if existing[0] is None:
        return False, None
    return False, instance_from_row(workflow, existing)


_create_or_find: dict[bool, str] = {}


def _create_or_find_sql(with_interests: bool) -> str:
    """Read the key's instance; INSERT (with audit and interest rows) only if there is
    none: a repeated key costs a read, not a speculative insertion."""
    sql = _create_or_find.get(with_interests)
    if sql is None:
        fields = TriggerInstance._meta.concrete_fields
        pk = TriggerInstance._meta.pk.column
        created_at = TriggerInstance._meta.get_field("created_at").column
        columns = ", ".join(f'"{f.column}"' for f in fields)
        values = ", ".join(f"%s::{f.cast_db_type(connection)}" for f in fields)
        audit = _AUDIT_INSERT.replace(", %s, %s FROM moved", f', "{created_at}", %s FROM created')
        sql = (
            f"WITH existing AS ({by_key_sql()}),"
            f' created AS (INSERT INTO "{TriggerInstance._meta.db_table}" ({columns})'
            f" SELECT {values} WHERE NOT EXISTS (SELECT 1 FROM existing)"
            f' ON CONFLICT DO NOTHING RETURNING "{pk}", "{created_at}"), audit AS ({audit})'
        )
        if with_interests:
            sql += (
                f', interests AS ({_INTEREST_INSERT} SELECT "{pk}", unnest(%s::text[])'
                " FROM created)"
            )
        sql += (
            f' SELECT c."{pk}", e.* FROM (SELECT 1) AS one LEFT JOIN created c ON true'
            " LEFT JOIN existing e ON true"
        )
        _create_or_find[with_interests] = sql
    return sql


def _create_one(instance: TriggerInstance, actor: str, interests: Sequence[str]) -> set[uuid.UUID]:
    fields = TriggerInstance._meta.concrete_fields
    params: list[Any] = [
        f.get_db_prep_save(getattr(instance, f.attname), connection) for f in fields
    ]
    params += [*CREATED, "created", actor[:200], None]
    if interests:
        params.append(list(interests))
    pk = TriggerInstance._meta.pk.column
    with connection.cursor() as cursor:
        cursor.execute(_one_row_sql(bool(interests)) + f' SELECT "{pk}" FROM created', params)
        return {found for (found,) in cursor.fetchall()}


_one_row: dict[bool, str] = {}


def _one_row_sql(with_interests: bool) -> str:
    """The CTEs that insert one instance (``created``), its audit and interest rows; the
    caller adds the final SELECT."""
    sql = _one_row.get(with_interests)
    if sql is None:
        fields = TriggerInstance._meta.concrete_fields
        pk = TriggerInstance._meta.pk.column
        created_at = TriggerInstance._meta.get_field("created_at").column
        columns = ", ".join(f'"{f.column}"' for f in fields)
        audit = _AUDIT_INSERT.replace(", %s, %s FROM moved", f', "{created_at}", %s FROM created')
        sql = (
            f'WITH created AS (INSERT INTO "{TriggerInstance._meta.db_table}" ({columns})'
            f" VALUES ({', '.join(['%s'] * len(fields))})"
            f' ON CONFLICT DO NOTHING RETURNING "{pk}", "{created_at}"), audit AS ({audit})'
        )
        if with_interests:
            sql += (
                f', interests AS ({_INTEREST_INSERT} SELECT "{pk}", unnest(%s::text[])'
                " FROM created)"
            )
        _one_row[with_interests] = sql
    return sql


_bulk_sql: list[str] = []


def _bulk_insert_sql() -> str:
    if _bulk_sql:
        return _bulk_sql[0]
    fields = TriggerInstance._meta.concrete_fields
    by_attname = {field.attname: field for field in fields}
    table = TriggerInstance._meta.db_table
    pk = TriggerInstance._meta.pk.column
    created_at = by_attname["created_at"].column
    arrays = ", ".join(
        "%s::text[]"
        if name == "payload"  # JSON text, cast per element below
        else f"%s::{by_attname[name].cast_db_type(connection)}[]"
        for name in _BULK_VARYING
    )
    values = []
    for column in fields:
        if column.attname == "payload":
            values.append("v.payload::jsonb")
        elif column.attname in _BULK_VARYING:
            values.append(f"v.{column.attname}")
        else:  # the same for every row: one parameter
            values.append(f"%s::{column.cast_db_type(connection)}")
    select = ", ".join(values)
    columns = ", ".join(f'"{field.column}"' for field in fields)
    # The audit row's time is each instance's own created_at, as in ``create``.
    audit = _AUDIT_INSERT.replace(", %s, %s FROM moved", f', "{created_at}", %s FROM created')
    sql = (
        f'WITH created AS (INSERT INTO "{table}" ({columns}) SELECT {select}'
        f" FROM unnest({arrays}) AS v({', '.join(_BULK_VARYING)})"
        # One order for every writer: two requests inserting overlapping keys wait on
        # each other's keys in the same order, never in a cycle (a deadlock otherwise).
        " ORDER BY v.workflow_id, v.idempotency_key"
        f' ON CONFLICT DO NOTHING RETURNING "{pk}", "{created_at}"),'
        f" audit AS ({audit}),"
        f" interests AS ({_INTEREST_INSERT} SELECT s.owner, s.subject FROM created"
        " JOIN unnest(%s::uuid[], %s::text[]) AS s(owner, subject)"
        f' ON s.owner = created."{pk}")'
        f' SELECT "{pk}" FROM created'
    )
    _bulk_sql.append(sql)
    return sql


def retry_failed(
    *,
    instance_id: uuid.UUID | str,
    actor: str,
    reason: str = "retried by operator",
    workflow_version_id: int | None = None,
    payload: dict[str, Any] | None = None,
    expect: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> bool:
    """failed -> enqueued now, attempts reset: the only way out of failed.

    An operator may pin another version of the workflow (``workflow_version_id``) or
    replace the payload in the same fenced write; ``expect`` are further lookups the
    row must still match (the version or payload the operator saw), ``details`` what
    changed, for the audit row."""
    now = timezone.now()
    updates: dict[str, Any] = {
        "attempts": 0,
        "available_at": now,
        "dispatched_at": now,
        "finished_at": None,
        "last_error": "",
    }
    if workflow_version_id is not None:
        updates["workflow_version_id"] = workflow_version_id
    if payload is not None:
        updates["payload"] = payload
    moved = transition(
        instance_id=instance_id,
        from_status=S.FAILED,
        to_status=S.ENQUEUED,
        reason=reason,
        actor=actor,
        where=expect,
        updates=updates,
        details=details,
    )
    if moved:
        dispatch_on_commit(instance_id)
    return moved


def make_due_now(*, instance_id: uuid.UUID | str, actor: str, reason: str = "") -> bool:
    """A waiting (delayed or backing-off) enqueued instance becomes due now; the
    operator's ``reason``, if any, is appended to the audit row's."""
    now = timezone.now()
    why = "run now (delay skipped) by operator"
    moved = transition(
        instance_id=instance_id,
        from_status=S.ENQUEUED,
        to_status=S.ENQUEUED,
        reason=f"{why}: {reason.strip()}" if reason.strip() else why,
        actor=actor,
        where={"available_at__gt": now},
        updates={"available_at": now, "dispatched_at": now},
    )
    if moved:
        dispatch_on_commit(instance_id)
    return moved


# --- building the statements -----------------------------------------------------------


def _prepare(
    instance_id: uuid.UUID | str,
    from_status: str,
    to_status: str,
    reason: str,
    actor: str,
    lease_token: uuid.UUID | None,
    where: dict[str, Any] | None,
    updates: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    check_transition(from_status, to_status)
    now = timezone.now()
    conditions = {"pk": instance_id, "status": from_status, **(where or {})}
    if lease_token is not None:
        conditions["lease_token"] = lease_token
    values = {"status": to_status, "updated_at": now, **(updates or {})}
    if to_status in (S.COMPLETED, S.FAILED, S.CANCELLED):
        values.setdefault("finished_at", now)
    if from_status == S.PROCESSING and to_status != S.PROCESSING:
        values.update(lease_token=None, locked_by="", locked_until=None)
    audit = {
        "instance_id": instance_id,
        "from_status": from_status,
        "to_status": to_status,
        "reason": reason[:2000],
        "actor": actor[:200],
        "at": now,
    }
    return conditions, values, audit


_CONCRETE = list(TriggerInstance._meta.concrete_fields)
_COLUMNS = [f'"{f.column}"' for f in _CONCRETE]
_RETURNING = ", ".join(_COLUMNS)


def _from_db(field: Any, value: Any, conn: Any) -> Any:
    """A column's value as the ORM would load it (JSON arrives as text)."""
    if value is not None and hasattr(field, "from_db_value"):
        return field.from_db_value(value, None, conn)
    return value


_FIELDS = {f.name: f for f in TriggerInstance._meta.concrete_fields}
_FIELDS.update({f.attname: f for f in TriggerInstance._meta.concrete_fields})
_FIELDS["pk"] = TriggerInstance._meta.pk
_OPERATORS = {"": "=", "lte": "<=", "lt": "<", "gte": ">=", "gt": ">"}
_update_sql_cache: dict[tuple, str] = {}
_AUDIT_COLUMNS = ", ".join(
    f'"{TriggerStatusChange._meta.get_field(name).column}"'  # type: ignore[union-attr]
    for name in ("instance", "from_status", "to_status", "reason", "actor", "at", "details")
)
_AUDIT_INSERT = (
    f'INSERT INTO "{TriggerStatusChange._meta.db_table}" ({_AUDIT_COLUMNS})'
    f' SELECT "{TriggerInstance._meta.pk.column}", %s, %s, %s, %s, %s, %s FROM moved'
)
_AUDIT_DETAILS = TriggerStatusChange._meta.get_field("details")
# ``transition(durable=True)``: synchronous commit for this statement's transaction only.
_DURABLE = ", set_config('synchronous_commit', 'on', true)"


_WORKFLOW = TriggerInstance._meta.get_field("workflow").related_model._meta
# The claim's test that the workflow is not paused (a primary-key probe per claim).
_NOT_PAUSED = (
    f'NOT EXISTS (SELECT 1 FROM "{_WORKFLOW.db_table}" w'
    f' WHERE w."{_WORKFLOW.pk.column}" = "{TriggerInstance._meta.db_table}".'
    f'"{TriggerInstance._meta.get_field("workflow").column}"'
    f' AND w."{_WORKFLOW.get_field("is_paused").column}")'  # type: ignore[union-attr]
)


_INTEREST_INSERT = (
    f'INSERT INTO "{Interest._meta.db_table}" ("{Interest._meta.get_field("instance").column}",'
    f' "{Interest._meta.get_field("subject").column}")'
)


def _update_sql(
    conditions: dict[str, Any], values: dict[str, Any], extra_where: str = ""
) -> tuple[str, list[Any]]:
    """``UPDATE triggerinstance SET values WHERE conditions`` as SQL and parameters.

    Built from the model's fields and cached by shape (the ORM's compiler was ~14% of a
    step, bench/RESULTS.md); values go through each field's ``get_db_prep_*`` so JSON,
    UUID and datetimes adapt as the ORM would. Conditions are ``field`` or
    ``field__lte``-style lookups.
    """
    shape = (tuple(conditions), tuple(values), extra_where)
    sql = _update_sql_cache.get(shape)
    if sql is None:
        sets = ", ".join(f'"{_FIELDS[name].column}" = %s' for name in values)
        wheres = []
        for lookup in conditions:
            name, _, op = lookup.partition("__")
            column = f'"{_FIELDS[name].column}"'
            if name == "status":
                # Every transition is by primary key. Written plainly, the status test
                # lets the planner pick a partial index (status = 'enqueued' /
                # 'processing') whenever statistics call it empty, and then walk every
                # due row to find this one (seen in bench/RESULTS.md). As an expression
                # it implies no partial index, so the plan is always the primary key.
                column = f"({column} || '')"
            wheres.append(f"{column} {_OPERATORS[op]} %s")
        if extra_where:
            wheres.append(extra_where)
        sql = f'UPDATE "{TriggerInstance._meta.db_table}" SET {sets} WHERE {" AND ".join(wheres)}'
        _update_sql_cache[shape] = sql
    conn = db.current()
    params = [_FIELDS[name].get_db_prep_save(value, conn) for name, value in values.items()]
    params += [
        _FIELDS[lookup.partition("__")[0]].get_db_prep_value(value, conn)
        for lookup, value in conditions.items()
    ]
    return sql, params


def _statement(
    conditions: dict[str, Any],
    values: dict[str, Any],
    audit: dict[str, Any],
    also: Sequence[Statement],
    select: str,
    returning: str | None = None,
    extra_where: str = "",
) -> tuple[str, list[Any]]:
    """PostgreSQL: the conditional UPDATE, its audit row and ``also`` as one statement."""
    update, params = _update_sql(conditions, values, extra_where)
    returning = returning or f'"{TriggerInstance._meta.pk.column}"'
    ctes = [f"moved AS ({update} RETURNING {returning})", f"audit AS ({_AUDIT_INSERT})"]
    params += [
        audit["from_status"],
        audit["to_status"],
        audit["reason"],
        audit["actor"],
        audit["at"],
        _AUDIT_DETAILS.get_db_prep_save(audit.get("details"), db.current()),
    ]
    for index, statement in enumerate(also):
        ctes.append(f"also_{index} AS ({statement.sql})")
        params += statement.params
    return f"WITH {', '.join(ctes)} {select}", params
