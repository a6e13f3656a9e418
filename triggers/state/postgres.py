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

The statements are built from the models' ``_meta`` (``table_sql``: no column written
by hand) once per shape, cached with ``functools.cache``; the named pieces below read
top to bottom as the SQL they produce. The INSERTs that create instances are
``postgres_creation``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import DEFERRED

from notifyflow import db
from status_webhooks import outbox
from status_webhooks.models import WebhookEndpoint
from status_webhooks.outbox import NewEvent

from ..models import TriggerInstance
from . import shapes
from .postgres_creation import PostgresCreation
from .shapes import Change, Join, Reported, Statement
from .table_sql import ATTNAMES, AUDIT, CONCRETE, FIELDS, INSTANCE, PK, TABLE, audit_insert, q

_WORKFLOW = INSTANCE.get_field("workflow").related_model._meta

# --- the names other modules' fragments use --------------------------------------------

# The updated (claimed) row of a transition's statement.
CLAIMED = "moved"
# True inside a transition's statement when the fenced UPDATE applied.
APPLIED = f"EXISTS (SELECT 1 FROM {CLAIMED})"

# --- named pieces ----------------------------------------------------------------------

# The claim's test that the workflow is not paused (a primary-key probe per claim).
NOT_PAUSED = (
    f'NOT EXISTS (SELECT 1 FROM "{_WORKFLOW.db_table}" w'
    f' WHERE w."{_WORKFLOW.pk.column}" = {TABLE}.{q(INSTANCE, "workflow")}'
    f' AND w."{_WORKFLOW.get_field("is_paused").column}")'  # type: ignore[union-attr]
)

# The claim's concurrency check: an instance without a key (its workflow had
# no limit) costs one NULL test; one with a key is admitted only if its (workflow, key)
# has fewer executing steps than the workflow's limit now, counted under an advisory
# lock (the function and why it is VOLATILE: migration 0020_concurrency_admits).
CONCURRENCY_ADMITS = (
    f"({TABLE}.{q(INSTANCE, 'concurrency_key')} IS NULL"
    f" OR notifyflow_concurrency_admits({TABLE}.{q(INSTANCE, 'workflow')},"
    f" {TABLE}.{q(INSTANCE, 'concurrency_key')}))"
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
    sets = ", ".join(f'"{FIELDS[name].column}" = %s' for name in values)
    wheres = []
    for lookup, isnull in conditions:
        name, _, op = lookup.partition("__")
        column = f'"{FIELDS[name].column}"'
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
    params = [db.prep_save(FIELDS[name])(value) for name, value in change.values.items()]
    params += [
        db.prep_save(FIELDS[lookup.partition("__")[0]])(value)
        for lookup, value in change.conditions.items()
        if not lookup.endswith("__isnull")
    ]
    return sql, params


_AUDIT_DETAILS = AUDIT.get_field("details")


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
        ctes.append(f"audit AS ({audit_insert(CLAIMED)})")
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
    skipped = {FIELDS[name].attname for name in written} | CLAIM_UNREAD
    return [f for f in CONCRETE if f.attname not in skipped]


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
    written_at = {FIELDS[name].attname: name for name in written}
    read_at = {f.attname: index for index, f in enumerate(read)}
    return _ClaimShape(
        select=f"SELECT {columns} FROM {CLAIMED} {join.clause if join else ''}",
        returning=", ".join(f'"{f.column}"' for f in read),
        loaders=tuple(getattr(f, "from_db_value", None) for f in read),
        sources=tuple(read_at.get(f.attname, written_at.get(f.attname)) for f in CONCRETE),
        joined=tuple(column.rpartition(" AS ")[2] for column in (join.columns if join else ())),
    )


# --- the store -------------------------------------------------------------------------


class PostgresInstanceStore(PostgresCreation, shapes.InstanceStore):
    """The state machine's writes as the statements above (and ``PostgresCreation``'s),
    one round trip each."""

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
        instance = TriggerInstance.from_db(conn.alias, ATTNAMES, values)
        for name, value in zip(shape.joined, row[len(shape.loaders) :], strict=True):
            setattr(instance, name, value)
        return instance
