"""The instance INSERTs on PostgreSQL (``PostgresCreation``, the creating half of
``postgres.PostgresInstanceStore``): one statement whatever the number of rows, each
new instance with its creation audit row and its interest rows, ON CONFLICT DO NOTHING
on the idempotency keys (``creation`` says what the callers need of them). Built from
the models' ``_meta`` (``table_sql``) once per shape, cached with ``functools.cache``.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from notifyflow import db
from notifyflow.ids import UUID7_SQL
from workflows.models import Workflow

from ..models import TriggerInstance
from ..selectors import by_key_sql, instance_from_row
from .shapes import CREATED, NewInstance, as_model
from .table_sql import (
    COLUMNS,
    CONCRETE,
    FIELDS,
    INSTANCE,
    INTEREST_INSERT,
    PK,
    TABLE,
    audit_insert,
    q,
)

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
    arrays = ", ".join(f"%s::{FIELDS[name].cast_db_type(connection)}[]" for name in varying)
    values = [
        UUID7_SQL
        if generated_id and f.attname == "id"
        else f"v.{f.attname}"
        if f.attname in varying
        else f"%s::{f.cast_db_type(connection)}"
        for f in CONCRETE
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
        f"{name} {'jsonb' if name == 'payload' else FIELDS[name].cast_db_type(connection)}"
        for name in varying
    )
    values = [
        f"v.{f.attname}" if f.attname in varying else f"%s::{f.cast_db_type(connection)}"
        for f in CONCRETE
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
    values = ", ".join(f"%s::{f.cast_db_type(connection)}" for f in CONCRETE)
    return f"SELECT {values} WHERE NOT EXISTS (SELECT 1 FROM existing)"


@functools.cache
def instance_insert(*, many: bool, varying: tuple[str, ...] = VARYING) -> str:
    """The one instance INSERT: ``created`` (ON CONFLICT DO NOTHING), the audit row of
    each created instance at its own created_at, and its interest rows (two parallel
    arrays, owner ids and subjects). ``many``: the rows come from arrays and the
    statement returns the created ids; otherwise one row, inserted only if no instance
    holds its key, and the statement returns the created id or the existing row."""
    created_at = q(INSTANCE, "created_at")
    if not many:
        rows = _row_unless_existing()
    elif "payload" in varying:  # VARYING, with or without the concurrency key
        rows = _rows_from_json(varying)
    else:
        rows = _rows_from_arrays(varying)
    created = (
        f"created AS (INSERT INTO {TABLE} ({', '.join(COLUMNS)}) {rows}"
        f" ON CONFLICT DO NOTHING RETURNING {PK}, {created_at})"
    )
    audit = f"audit AS ({audit_insert('created', at=created_at)})"
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
    created_at = q(INSTANCE, "created_at")
    rows = _rows_from_arrays(GENERATED_ID_VARYING, generated_id=True)
    return (
        f"WITH created AS (INSERT INTO {TABLE} ({', '.join(COLUMNS)}) {rows}"
        f" ON CONFLICT DO NOTHING RETURNING {PK}, {created_at}),"
        f" audit AS ({audit_insert('created', at=created_at)})"
        f" SELECT {PK}::text FROM created"
    )


# --- the store's creating half ---------------------------------------------------------


class PostgresCreation:
    """``InstanceStore``'s creating writes, as the statements above, one round trip
    each."""

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
            for f in CONCRETE
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
            for f in CONCRETE
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
        params += [f.get_db_prep_save(getattr(instance, f.attname), connection) for f in CONCRETE]
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
