"""Claiming and recording status webhook messages: one store class per database, chosen
once (``DELIVERY_STORE``).

- **Claim**: lease up to ``limit`` due pending messages, oldest due first, skipping rows
  another deliverer holds (locked or leased), and return them with their endpoints.
  PostgreSQL: one statement (``CLAIM``: ``FOR UPDATE SKIP LOCKED`` in a CTE, the lease
  set by an ``UPDATE … FROM`` that returns the message and its endpoint). Elsewhere:
  the ORM in a short transaction (select, conditional update, read back).
- **Record**: a claim's outcomes at once - every attempt's row, each message's next
  state where its lease still holds, the endpoints that answered 2xx healthy again.
  PostgreSQL: one statement (``RECORD``), the outcomes one JSON parameter; the messages
  are locked first (``FOR UPDATE`` in a CTE), so a message deleted meanwhile (its
  endpoint deleted) loses its attempt row instead of failing the statement, and a replay
  waits for the record. Elsewhere: the same in an ORM transaction.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.models import Q

from notifyflow import db

from .models import MessageStatus, WebhookAttempt, WebhookEndpoint, WebhookMessage


@dataclass(frozen=True)
class AttemptRecord:
    """One message's attempt to record: the fence (``lease``, as claimed), the attempt's
    row and the message's next state (written only if the lease still holds)."""

    message_id: uuid.UUID
    lease: datetime | None
    attempted_at: datetime
    status_code: int | None
    duration_ms: int
    excerpt: str
    error: str
    attempts: int
    status: str
    next_attempt_at: datetime
    delivered_at: datetime | None


class DeliveryStore(Protocol):
    def claim(self, *, now: datetime, lease: datetime, limit: int) -> list[WebhookMessage]:
        """Lease (``locked_until = lease``) up to ``limit`` due pending messages that no
        one holds; them, with their endpoints."""
        ...

    def record(
        self, *, records: Sequence[AttemptRecord], healthy: Collection[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Write ``records`` and clear ``failing_since`` of the ``healthy`` endpoints;
        the ids of the messages whose lease held (their state written)."""
        ...


# --- PostgreSQL ------------------------------------------------------------------------

_M = WebhookMessage._meta
_E = WebhookEndpoint._meta
_A = WebhookAttempt._meta
_MESSAGE_FIELDS = _M.concrete_fields
_ENDPOINT_FIELDS = [
    next(field for field in _E.concrete_fields if field.name == name)
    for name in (
        "id",
        "url",
        "is_active",
        "secret",
        "previous_secret",
        "previous_secret_expires_at",
    )
]


def _c(meta: Any, name: str) -> str:
    return f'"{meta.get_field(name).column}"'


# Walks webhook_message_due (pending by next_attempt_at). Parameters: now, now, limit, lease.
CLAIM = f"""
WITH due AS MATERIALIZED (
    SELECT {_c(_M, "id")} FROM "{_M.db_table}"
    WHERE {_c(_M, "status")} = '{MessageStatus.PENDING}' AND {_c(_M, "next_attempt_at")} <= %s
      AND ({_c(_M, "locked_until")} IS NULL OR {_c(_M, "locked_until")} <= %s)
    ORDER BY {_c(_M, "next_attempt_at")}
    LIMIT %s
    FOR UPDATE SKIP LOCKED
)
UPDATE "{_M.db_table}" AS m SET {_c(_M, "locked_until")} = %s
FROM due, "{_E.db_table}" AS e
WHERE m.{_c(_M, "id")} = due.{_c(_M, "id")} AND e.{_c(_E, "id")} = m.{_c(_M, "endpoint")}
RETURNING {", ".join(f'm."{f.column}"' for f in _MESSAGE_FIELDS)},
    {", ".join(f'e."{f.column}"' for f in _ENDPOINT_FIELDS)}
"""

# Parameters: the records (a JSON array of AttemptRecord's fields), the healthy endpoints' ids.
RECORD = f"""
WITH outcome AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS o(
        message_id uuid, lease timestamptz, attempted_at timestamptz, status_code int,
        duration_ms int, excerpt text, error text, attempts int, status text,
        next_attempt_at timestamptz, delivered_at timestamptz)
), locked AS (
    SELECT m.{_c(_M, "id")} AS id, m.{_c(_M, "status")} AS status,
        m.{_c(_M, "locked_until")} AS locked_until
    FROM "{_M.db_table}" AS m
    WHERE m.{_c(_M, "id")} IN (SELECT message_id FROM outcome)
    FOR UPDATE
), held AS (
    UPDATE "{_M.db_table}" AS m SET
        {_c(_M, "attempts")} = o.attempts, {_c(_M, "locked_until")} = NULL,
        {_c(_M, "last_status_code")} = o.status_code, {_c(_M, "last_error")} = o.error,
        {_c(_M, "status")} = o.status, {_c(_M, "delivered_at")} = o.delivered_at,
        {_c(_M, "next_attempt_at")} = o.next_attempt_at
    FROM outcome AS o, locked AS l
    WHERE m.{_c(_M, "id")} = o.message_id AND l.id = o.message_id
      AND l.status = '{MessageStatus.PENDING}' AND l.locked_until = o.lease
    RETURNING m.{_c(_M, "id")}
), tried AS (
    INSERT INTO "{_A.db_table}" ({_c(_A, "message")}, {_c(_A, "attempted_at")},
        {_c(_A, "status_code")}, {_c(_A, "duration_ms")}, {_c(_A, "response_excerpt")},
        {_c(_A, "error")})
    SELECT o.message_id, o.attempted_at, o.status_code, o.duration_ms, o.excerpt, o.error
    FROM outcome AS o JOIN locked AS l ON l.id = o.message_id
), healthy AS (
    UPDATE "{_E.db_table}" SET {_c(_E, "failing_since")} = NULL
    WHERE {_c(_E, "id")} = ANY(%s::uuid[]) AND {_c(_E, "failing_since")} IS NOT NULL
)
SELECT {_c(_M, "id")} FROM held
"""


def _from_db(field: Any, value: Any) -> Any:
    if value is not None and hasattr(field, "from_db_value"):
        return field.from_db_value(value, None, connection)
    return value


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class PostgresDeliveryStore(DeliveryStore):
    def claim(self, *, now: datetime, lease: datetime, limit: int) -> list[WebhookMessage]:
        with connection.cursor() as cursor:
            rows = db.execute(cursor, CLAIM, [now, now, limit, lease])
            rows = rows.fetchall()
        count = len(_MESSAGE_FIELDS)
        names = [f.attname for f in _MESSAGE_FIELDS]
        endpoints: dict[Any, WebhookEndpoint] = {}
        messages = []
        for row in rows:
            message = WebhookMessage.from_db(
                connection.alias,
                names,
                [_from_db(f, v) for f, v in zip(_MESSAGE_FIELDS, row[:count], strict=True)],
            )
            endpoint = endpoints.get(row[count])
            if endpoint is None:  # one instance per endpoint: a claim's mostly share one
                endpoint = endpoints[row[count]] = WebhookEndpoint.from_db(
                    connection.alias, [f.attname for f in _ENDPOINT_FIELDS], list(row[count:])
                )
            message.endpoint = endpoint
            messages.append(message)
        messages.sort(key=lambda m: m.next_attempt_at)
        return messages

    def record(
        self, *, records: Sequence[AttemptRecord], healthy: Collection[uuid.UUID]
    ) -> set[uuid.UUID]:
        document = json.dumps(
            [
                {
                    "message_id": str(o.message_id),
                    "lease": _iso(o.lease),
                    "attempted_at": _iso(o.attempted_at),
                    "status_code": o.status_code,
                    "duration_ms": o.duration_ms,
                    "excerpt": o.excerpt,
                    "error": o.error,
                    "attempts": o.attempts,
                    "status": o.status,
                    "next_attempt_at": _iso(o.next_attempt_at),
                    "delivered_at": _iso(o.delivered_at),
                }
                for o in records
            ]
        )
        with connection.cursor() as cursor:
            rows = db.execute(cursor, RECORD, [document, list(healthy)]).fetchall()
        return {row[0] for row in rows}


# --- elsewhere (SQLite) ----------------------------------------------------------------

_STATE_FIELDS = (
    "attempts",
    "locked_until",
    "last_status_code",
    "last_error",
    "status",
    "delivered_at",
    "next_attempt_at",
)


class OrmDeliveryStore(DeliveryStore):
    def claim(self, *, now: datetime, lease: datetime, limit: int) -> list[WebhookMessage]:
        free = Q(locked_until__isnull=True) | Q(locked_until__lte=now)
        with transaction.atomic():
            ids = list(
                WebhookMessage.objects.select_for_update(skip_locked=True)
                .filter(free, status=MessageStatus.PENDING, next_attempt_at__lte=now)
                .order_by("next_attempt_at")
                .values_list("pk", flat=True)[:limit]
            )
            if not ids:
                return []
            # The same conditions again: with no row locks (SQLite) a second deliverer
            # may have read the same ids, and whoever writes first holds them.
            WebhookMessage.objects.filter(free, pk__in=ids, status=MessageStatus.PENDING).update(
                locked_until=lease
            )
        return list(
            WebhookMessage.objects.filter(pk__in=ids, locked_until=lease)
            .select_related("endpoint")
            .order_by("next_attempt_at")
        )

    def record(
        self, *, records: Sequence[AttemptRecord], healthy: Collection[uuid.UUID]
    ) -> set[uuid.UUID]:
        with transaction.atomic():
            # Locks the rows (where there are row locks): a replay waits for this record.
            rows = (
                WebhookMessage.objects.select_for_update()
                .filter(pk__in=[o.message_id for o in records])
                .values_list("pk", "locked_until", "status")
            )
            existing = {pk: (lease, status) for pk, lease, status in rows}
            held = [
                o for o in records if existing.get(o.message_id) == (o.lease, MessageStatus.PENDING)
            ]
            _states_update(held)
            WebhookAttempt.objects.bulk_create(
                WebhookAttempt(
                    message_id=o.message_id,
                    attempted_at=o.attempted_at,
                    status_code=o.status_code,
                    duration_ms=o.duration_ms,
                    response_excerpt=o.excerpt,
                    error=o.error,
                )
                for o in records
                if o.message_id in existing
            )
            if healthy:
                WebhookEndpoint.objects.filter(pk__in=healthy, failing_since__isnull=False).update(
                    failing_since=None
                )
        return {o.message_id for o in held}


def _states_update(records: Sequence[AttemptRecord]) -> None:
    """One UPDATE per distinct next state (a claim's are mostly alike: delivered with a
    200), not ``bulk_update``'s CASE per row and field."""
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for o in records:
        state = (o.attempts, None, o.status_code, o.error, o.status)
        groups[(*state, o.delivered_at, o.next_attempt_at)].append(o.message_id)
    for values, pks in groups.items():
        WebhookMessage.objects.filter(pk__in=pks).update(
            **dict(zip(_STATE_FIELDS, values, strict=True))
        )


DELIVERY_STORE: DeliveryStore = db.per_database(
    postgres=PostgresDeliveryStore, other=OrmDeliveryStore
)
