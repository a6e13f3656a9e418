"""The state machine's writes on PostgreSQL (``PostgresInstanceStore``), each one
statement (one round trip).

A transition is a chain of data-modifying CTEs: the fenced UPDATE (``moved``: the
updated row, empty when the transition did not apply), its audit INSERT, and the
caller's ``also`` statements (a step's log row, its delivery record), atomic without an
explicit transaction (bench/RESULTS.md, "statements per step"). Those statements test
``APPLIED`` and join ``CLAIMED`` instead of naming the CTE: this module owns it. Its
SELECT returns ``APPLIED``, writes the status events (``status_events_sql``) and may
turn synchronous commit on (``DURABLE``); executions/recording/postgres.py lays out a
step's statement whole.

The statements are built from the models' ``_meta`` (no column written by hand) once
per shape, cached with ``functools.cache``; the named pieces below read top to bottom
as the SQL they produce.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import DEFERRED

from notifyflow import db
from notifyflow.ids import UUID7_SQL
from status_webhooks import outbox
from status_webhooks.models import WebhookEndpoint
from status_webhooks.outbox import NewEvent
from workflows.models import Workflow

from ..models import Interest, TriggerInstance, TriggerStatusChange
from ..selectors import by_key_sql, instance_from_row
from . import shapes
from .shapes import CREATED, Change, Join, NewInstance, Reported, Statement, as_model

_INSTANCE = TriggerInstance._meta
_AUDIT = TriggerStatusChange._meta
_INTEREST = Interest._meta
_WORKFLOW = _INSTANCE.get_field("workflow").related_model._meta


def _q(meta: Any, name: str) -> str:
    """A model field's quoted column."""
    return f'"{meta.get_field(name).column}"'


TABLE = f'"{_INSTANCE.db_table}"'
PK = f'"{_INSTANCE.pk.column}"'
_CONCRETE = list(_INSTANCE.concrete_fields)
# By name, not ``*``: a prepared statement's result type must not change under it when a
# migration adds a column.
_COLUMNS = [f'"{f.column}"' for f in _CONCRETE]
_FIELDS = {f.name: f for f in _CONCRETE} | {f.attname: f for f in _CONCRETE}
_FIELDS["pk"] = _INSTANCE.pk
_ATTNAMES = [f.attname for f in _CONCRETE]

# --- the names other modules' fragments use --------------------------------------------

# The updated (claimed) row of a transition's statement.
CLAIMED = "moved"
# True inside a transition's statement when the fenced UPDATE applied.
APPLIED = f"EXISTS (SELECT 1 FROM {CLAIMED})"

# --- named pieces ----------------------------------------------------------------------

_AUDIT_COLUMNS = ", ".join(
    _q(_AUDIT, name)
    for name in ("instance", "from_status", "to_status", "reason", "actor", "at", "details")
)


def _audit_insert(source: str, at: str = "%s") -> str:
    """The audit row of every row of ``source``; parameters: from, to, reason, actor,
    (``at`` unless given as a column), details."""
    return (
        f'INSERT INTO "{_AUDIT.db_table}" ({_AUDIT_COLUMNS})'
        f" SELECT {PK}, %s, %s, %s, %s, {at}, %s FROM {source}"
    )


INTEREST_INSERT = (
    f'INSERT INTO "{_INTEREST.db_table}" ({_q(_INTEREST, "instance")}, {_q(_INTEREST, "subject")})'
)

# The claim's test that the workflow is not paused (a primary-key probe per claim).
NOT_PAUSED = (
    f'NOT EXISTS (SELECT 1 FROM "{_WORKFLOW.db_table}" w'
    f' WHERE w."{_WORKFLOW.pk.column}" = {TABLE}.{_q(_INSTANCE, "workflow")}'
    f' AND w."{_WORKFLOW.get_field("is_paused").column}")'  # type: ignore[union-attr]
)

# The claim's concurrency check: an instance without a key (its workflow had
# no limit) costs one NULL test; one with a key is admitted only if its (workflow, key)
# has fewer executing steps than the workflow's limit now, counted under an advisory
# lock (the function and why it is VOLATILE: migration 0020_concurrency_admits).
CONCURRENCY_ADMITS = (
    f"({TABLE}.{_q(_INSTANCE, 'concurrency_key')} IS NULL"
    f" OR notifyflow_concurrency_admits({TABLE}.{_q(_INSTANCE, 'workflow')},"
    f" {TABLE}.{_q(_INSTANCE, 'concurrency_key')}))"
)
_CLAIM_WHERE = f"{NOT_PAUSED} AND {CONCURRENCY_ADMITS}"

# ``transition(durable=True)``: synchronous commit for this statement's transaction only.
DURABLE = ", set_config('synchronous_commit', 'on', true)"

_OPERATORS = {"": "=", "lte": "<=", "lt": "<", "gte": ">=", "gt": ">"}


@functools.cache
def update_sql(
    conditions: tuple[tuple[str, Any], ...], values: tuple[str, ...], extra_where: str = ""
) -> str:
    """``UPDATE triggerinstance SET values WHERE conditions``, cached by shape (the ORM's
    compiler was a large share of a step, bench/RESULTS.md). ``conditions`` are
    ``(lookup, None)`` - ``field`` or ``field__lte``-style, a parameter each - or
    ``(field__isnull, bool)``, part of the SQL."""
    sets = ", ".join(f'"{_FIELDS[name].column}" = %s' for name in values)
    wheres = []
    for lookup, isnull in conditions:
        name, _, op = lookup.partition("__")
        column = f'"{_FIELDS[name].column}"'
        if op == "isnull":
            wheres.append(f"{column} IS {'' if isnull else 'NOT '}NULL")
            continue
        if name == "status":
            # Every transition is by primary key. Written plainly, the status test lets
            # the planner pick a partial index (status = 'enqueued' / 'processing')
            # whenever statistics call it empty, and then walk every due row to find
            # this one (bench/RESULTS.md). As an expression it implies no partial
            # index, so the plan is always the primary key.
            column = f"({column} || '')"
        wheres.append(f"{column} {_OPERATORS[op]} %s")
    if extra_where:
        wheres.append(extra_where)
    return f"UPDATE {TABLE} SET {sets} WHERE {' AND '.join(wheres)}"


def _update(change: Change, extra_where: str = "") -> tuple[str, list[Any]]:
    shape = tuple(
        (lookup, bool(value) if lookup.endswith("__isnull") else None)
        for lookup, value in change.conditions.items()
    )
    sql = update_sql(shape, tuple(change.values), extra_where)
    params = [db.prep_save(_FIELDS[name])(value) for name, value in change.values.items()]
    params += [
        db.prep_save(_FIELDS[lookup.partition("__")[0]])(value)
        for lookup, value in change.conditions.items()
        if not lookup.endswith("__isnull")
    ]
    return sql, params


_AUDIT_DETAILS = _AUDIT.get_field("details")


def _statement(
    change: Change,
    also: Sequence[Statement],
    select: str,
    returning: str = PK,
    extra_where: str = "",
) -> tuple[str, list[Any]]:
    """The conditional UPDATE, its audit row (if ``change.audited``) and ``also`` as
    one statement."""
    update, params = _update(change, extra_where)
    ctes = [f"{CLAIMED} AS ({update} RETURNING {returning})"]
    if change.audited:
        ctes.append(f"audit AS ({_audit_insert(CLAIMED)})")
        audit = change.audit
        params += [audit["from_status"], audit["to_status"], audit["reason"], audit["actor"]]
        details = _AUDIT_DETAILS.get_db_prep_save(audit.get("details"), db.current())
        params += [audit["at"], details]
    for index, statement in enumerate(also):
        ctes.append(f"{statement.name or f'also_{index}'} AS ({statement.sql})")
        params += statement.params
    return f"WITH {', '.join(ctes)} {select}", params


# --- a transition's status events ------------------------------------------------------

_ENDPOINT_TABLE = WebhookEndpoint._meta.db_table
# The events' data as JSON text (dates, UUIDs, decimals as Django's encoder writes them).
_ENCODER = DjangoJSONEncoder()


@functools.cache
def status_events_sql(guards: tuple[str, ...]) -> str:
    """The SELECT-list expression writing one instance's status events, each when its
    guard holds, by ``notifyflow_webhook_events`` (status_webhooks migration 0002) - only
    if some endpoint is active; its value: how many messages it wrote (NULL: none)."""
    return (
        f'CASE WHEN EXISTS (SELECT 1 FROM "{_ENDPOINT_TABLE}" e WHERE e."is_active")'
        " THEN notifyflow_webhook_events(%s::uuid, %s, %s, %s::jsonb,"
        f" ARRAY[{', '.join(guards)}]) END"
    )


def status_events_select(
    events: Sequence[tuple[NewEvent, str]], *, at: datetime
) -> tuple[str, list[Any]]:
    """``status_events_sql`` for ``events`` (of ONE instance, each with its guard) and
    its parameters: the messages ``status_webhooks.outbox.record`` would write."""
    first = events[0][0]
    assert first.instance_id is not None
    instance_id = str(first.instance_id)
    items = []
    for event, _ in events:
        assert event.instance_id is not None and str(event.instance_id) == instance_id
        items.append({"type": event.type, "data": {**event.data, "instance_id": instance_id}})
    params = [instance_id, first.workflow_key[:100], at, _ENCODER.encode(items)]
    return status_events_sql(tuple(guard for _, guard in events)), params


# Columns a claimed step never reads: not returned by the claim (deferred on the
# instance it returns). Fewer columns to send and convert on every step (issue 44).
CLAIM_UNREAD = frozenset(
    {"available_at", "dispatched_at", "last_error", "finished_at", "created_by_key"}
)


@functools.cache
def _claim_read(written: tuple[str, ...]) -> list[Any]:
    """The fields the claim returns: all but those it writes (their values are the
    change's) and CLAIM_UNREAD."""
    skipped = {_FIELDS[name].attname for name in written} | CLAIM_UNREAD
    return [f for f in _CONCRETE if f.attname not in skipped]


@dataclass(frozen=True)
class _ClaimShape:
    """What a claim writing ``written`` (and reading ``join``) sends and how it loads
    the row, worked out once per shape (a step's claim is one shape): the SELECT and
    RETURNING lists; per read column the field's ``from_db_value`` (None where the value
    is already what the ORM would load); per concrete field, in model order, where its
    value comes from (an index into the read columns, the name of a written one, None
    for a deferred one); the joined columns' attribute names."""

    select: str
    returning: str
    loaders: tuple[Callable[..., Any] | None, ...]
    sources: tuple[int | str | None, ...]
    joined: tuple[str, ...]


@functools.cache
def _claim_shape(written: tuple[str, ...], join: Join | None) -> _ClaimShape:
    read = _claim_read(written)
    columns = ", ".join(
        [*(f'{CLAIMED}."{f.column}"' for f in read), *(join.columns if join else ())]
    )
    written_at = {_FIELDS[name].attname: name for name in written}
    read_at = {f.attname: index for index, f in enumerate(read)}
    return _ClaimShape(
        select=f"SELECT {columns} FROM {CLAIMED} {join.clause if join else ''}",
        returning=", ".join(f'"{f.column}"' for f in read),
        loaders=tuple(getattr(f, "from_db_value", None) for f in read),
        sources=tuple(read_at.get(f.attname, written_at.get(f.attname)) for f in _CONCRETE),
        joined=tuple(column.rpartition(" AS ")[2] for column in (join.columns if join else ())),
    )


# --- creation --------------------------------------------------------------------------

# The columns that differ per instance in INSERT_MANY (one array each).
VARYING = (
    "id",
    "workflow_id",
    "workflow_version_id",
    "idempotency_key",
    "payload",
    "current_node_id",
    "recipient_id",
    "lane",
)


# A batch of one trigger's recipients (a fan-out's, a POST's): only these differ.
VARYING_PER_RECIPIENT = ("id", "recipient_id")


def _rows_from_arrays(varying: tuple[str, ...], generated_id: bool = False) -> str:
    """A recipients batch's rows: one array per varying column (a few plain columns);
    the others one parameter, but the id made by PostgreSQL (``UUID7_SQL``) if
    ``generated_id``."""
    arrays = ", ".join(f"%s::{_FIELDS[name].cast_db_type(connection)}[]" for name in varying)
    values = [
        UUID7_SQL
        if generated_id and f.attname == "id"
        else f"v.{f.attname}"
        if f.attname in varying
        else f"%s::{f.cast_db_type(connection)}"
        for f in _CONCRETE
    ]
    return (
        f"SELECT {', '.join(values)} FROM unnest({arrays}) AS v({', '.join(varying)})"
        f" ORDER BY {_order(varying)}"
    )


def _rows_from_json(varying: tuple[str, ...]) -> str:
    """INSERT_MANY's rows from one JSON array of objects, one key per varying column
    (``json_to_recordset``); the other columns one parameter each. One text parameter
    instead of an array per column: psycopg quotes one string in C where it walked
    seven arrays of 1,000 elements in Python (~18 ms of a 1,000-item bulk request,
    bench/RESULTS.md issue 29), and the payloads need no JSON dump each."""
    record = ", ".join(
        f"{name} {'jsonb' if name == 'payload' else _FIELDS[name].cast_db_type(connection)}"
        for name in varying
    )
    values = [
        f"v.{f.attname}" if f.attname in varying else f"%s::{f.cast_db_type(connection)}"
        for f in _CONCRETE
    ]
    return (
        f"SELECT {', '.join(values)} FROM json_to_recordset(%s::json) AS v({record})"
        f" ORDER BY {_order(varying)}"
    )


def _order(varying: tuple[str, ...]) -> str:
    # One order for every writer: two requests inserting overlapping keys wait on each
    # other's keys in the same order, never in a cycle (a deadlock otherwise).
    order = [f"v.{name}" for name in ("workflow_id", "idempotency_key") if name in varying]
    order.append("v.recipient_id")
    return ", ".join(order)


def _row_unless_existing() -> str:
    """INSERT_OR_FIND's row: one parameter per column, only if the key is free (a
    repeated key costs a read, not a speculative insertion)."""
    values = ", ".join(f"%s::{f.cast_db_type(connection)}" for f in _CONCRETE)
    return f"SELECT {values} WHERE NOT EXISTS (SELECT 1 FROM existing)"


@functools.cache
def instance_insert(*, many: bool, varying: tuple[str, ...] = VARYING) -> str:
    """The one instance INSERT: ``created`` (ON CONFLICT DO NOTHING), the audit row of
    each created instance at its own created_at, and its interest rows (two parallel
    arrays, owner ids and subjects). ``many``: the rows come from arrays and the
    statement returns the created ids; otherwise one row, inserted only if no instance
    holds its key, and the statement returns the created id or the existing row."""
    created_at = _q(_INSTANCE, "created_at")
    if not many:
        rows = _row_unless_existing()
    elif "payload" in varying:  # VARYING, with or without the concurrency key
        rows = _rows_from_json(varying)
    else:
        rows = _rows_from_arrays(varying)
    created = (
        f"created AS (INSERT INTO {TABLE} ({', '.join(_COLUMNS)}) {rows}"
        f" ON CONFLICT DO NOTHING RETURNING {PK}, {created_at})"
    )
    audit = f"audit AS ({_audit_insert('created', at=created_at)})"
    interests = (
        f"interests AS ({INTEREST_INSERT} SELECT s.owner, s.subject FROM created"
        f" JOIN unnest(%s::uuid[], %s::text[]) AS s(owner, subject) ON s.owner = created.{PK})"
    )
    if many:
        return f"WITH {created}, {audit}, {interests} SELECT {PK} FROM created"
    return (
        f"WITH existing AS ({by_key_sql()}), {created}, {audit}, {interests}"
        f" SELECT c.{PK}, e.* FROM (SELECT 1) AS one LEFT JOIN created c ON true"
        " LEFT JOIN existing e ON true"
    )


def _creation_params(rows: Sequence[NewInstance], actor: str) -> list[Any]:
    """The audit row's and the interests' parameters, after the rows'."""
    owners = [row.id for row in rows for _ in row.interests]
    subjects = [subject for row in rows for subject in row.interests]
    return [*CREATED, "created", actor[:200], None, owners, subjects]


# A batch of one trigger's recipients whose ids PostgreSQL makes: only these differ.
GENERATED_ID_VARYING = ("recipient_id",)


@functools.cache
def recipients_insert() -> str:
    """``instance_insert(many=True)`` for one trigger's recipients with ids made by
    PostgreSQL (``notifyflow.ids.UUID7_SQL``, per row): one array (the recipient ids),
    the creation audit rows, no interests; returns the created ids as text."""
    created_at = _q(_INSTANCE, "created_at")
    rows = _rows_from_arrays(GENERATED_ID_VARYING, generated_id=True)
    return (
        f"WITH created AS (INSERT INTO {TABLE} ({', '.join(_COLUMNS)}) {rows}"
        f" ON CONFLICT DO NOTHING RETURNING {PK}, {created_at}),"
        f" audit AS ({_audit_insert('created', at=created_at)})"
        f" SELECT {PK}::text FROM created"
    )


# --- the store -------------------------------------------------------------------------


class PostgresInstanceStore(shapes.InstanceStore):
    """The state machine's writes as the statements above, one round trip each."""

    def transition(
        self,
        change: Change,
        also: Sequence[Statement],
        durable: bool,
        events: Sequence[Reported] = (),
    ) -> bool:
        # Always one row, so set_config runs whether or not the transition applied (the
        # ``also`` rows, a delivery's 'sent' record, are written either way).
        select = f"SELECT {APPLIED}"
        select_params: list[Any] = []
        if events:
            # The status events in the same statement, each guarded.
            guarded = [(event, when or APPLIED) for event, when in events]
            written, select_params = status_events_select(guarded, at=change.audit["at"])
            select += f", {written}"
        select += DURABLE if durable else ""
        sql, params = _statement(change, also, select)
        params += select_params
        # By primary key: prepared (notifyflow/db.py).
        applied = bool(db.fetch_prepared(sql, params)[0])
        if events and outbox.any_active_endpoint():
            outbox.kick_on_commit()
        return applied

    def claim(self, change: Change, join: Join | None) -> TriggerInstance | None:
        shape = _claim_shape(tuple(change.values), join)
        sql, params = _statement(
            change,
            (),
            shape.select,
            returning=shape.returning,
            extra_where=_CLAIM_WHERE,
        )
        # By primary key: prepared (notifyflow/db.py).
        row = db.fetch_prepared(sql, params)
        if row is None:
            return None
        conn = db.current()
        # As the ORM would load them (JSON arrives as text); the columns the claim wrote
        # have its values; the ones no step reads are left deferred (read from the row if
        # anything asks).
        loaded = [
            value if load is None or value is None else load(value, None, conn)
            for load, value in zip(shape.loaders, row, strict=False)
        ]
        values = [
            DEFERRED
            if source is None
            else loaded[source]
            if isinstance(source, int)
            else change.values[source]
            for source in shape.sources
        ]
        instance = TriggerInstance.from_db(conn.alias, _ATTNAMES, values)
        for name, value in zip(shape.joined, row[len(shape.loaders) :], strict=True):
            setattr(instance, name, value)
        return instance

    def insert_many(self, rows: Sequence[NewInstance], now: datetime, actor: str) -> set[uuid.UUID]:
        first = rows[0]
        # One trigger's recipients share everything but the id and the recipient: those go
        # as single parameters (quoting 2,000 copies of the payload was a fifth of a batch).
        shared = all(
            row.workflow_id == first.workflow_id
            and row.workflow_version_id == first.workflow_version_id
            and row.idempotency_key == first.idempotency_key
            and row.payload is first.payload
            and row.entry_node_id == first.entry_node_id
            and row.lane == first.lane
            and row.recipient_id is not None
            for row in rows
        )
        varying = VARYING_PER_RECIPIENT if shared else VARYING
        if any(row.concurrency_key is not None for row in rows):
            # Only for workflows with a concurrency limit: their keys may differ per row.
            varying = (*varying, "concurrency_key")
        template = as_model(first, now)
        # In the statement's order: the constant columns (SELECT list), then the arrays.
        params: list[Any] = [
            f.get_db_prep_save(getattr(template, f.attname), connection)
            for f in _CONCRETE
            if f.attname not in varying
        ]
        # Each varying column's value, as JSON (``_rows_from_json``) or an array element.
        columns = {
            "id": lambda row: str(row.id),
            "workflow_id": lambda row: row.workflow_id,
            "workflow_version_id": lambda row: row.workflow_version_id,
            "idempotency_key": lambda row: row.idempotency_key,
            "payload": lambda row: row.payload,
            "current_node_id": lambda row: row.entry_node_id,
            "recipient_id": lambda row: row.recipient_id,
            "concurrency_key": lambda row: row.concurrency_key,
            "lane": lambda row: row.lane,
        }
        if "payload" in varying:
            getters = [(name, columns[name]) for name in varying]
            params.append(json.dumps([{name: get(row) for name, get in getters} for row in rows]))
        else:
            params += [[columns[name](row) for row in rows] for name in varying]
        params += _creation_params(rows, actor)
        with connection.cursor() as cursor:
            cursor.execute(instance_insert(many=True, varying=varying), params)
            return {found for (found,) in cursor.fetchall()}

    def insert_for_recipients(
        self, row: NewInstance, recipient_ids: Sequence[str], now: datetime, actor: str
    ) -> list[str]:
        template = as_model(row, now)
        params: list[Any] = [
            f.get_db_prep_save(getattr(template, f.attname), connection)
            for f in _CONCRETE
            if f.attname not in ("id", *GENERATED_ID_VARYING)
        ]
        params.append(list(recipient_ids))
        params += [*CREATED, "created", actor[:200], None]
        with connection.cursor() as cursor:
            cursor.execute(recipients_insert(), params)
            return [found for (found,) in cursor.fetchall()]

    def insert_or_find(
        self, row: NewInstance, now: datetime, actor: str, workflow: Workflow
    ) -> tuple[bool, TriggerInstance | None]:
        instance = as_model(row, now)
        params: list[Any] = [row.workflow_id, row.idempotency_key]
        params += [f.get_db_prep_save(getattr(instance, f.attname), connection) for f in _CONCRETE]
        params += _creation_params([row], actor)
        with connection.cursor() as cursor:
            # Prepared: only unique-key probes, and planning the CTEs was most of a POST's
            # PostgreSQL time.
            found = db.execute(cursor, instance_insert(many=False), params).fetchone()
        if found[0] is not None:
            return True, None
        existing = found[1:]
        if existing[0] is None:
            return False, None
        return False, instance_from_row(workflow, existing)
