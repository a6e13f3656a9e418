"""The outbox of status events: written in the transaction of the change it
reports, so nothing is reported that did not happen and nothing that happened is left
unreported; delivered after commit (``delivery``).

``record`` is the one writer of messages for Python callers (set-based: a cancellation
of thousands writes their events in a few statements). PostgreSQL's one-statement
transitions write the same messages inside their statement
(``triggers.state.postgres.status_events_sql``: an expression of the statement's SELECT
calling the PL/pgSQL writer of migration 0002 only when some endpoint is active, each
event guarded by the statement's test of whether its change applied). Each event about
an instance takes that instance's next ``sequence`` (``InstanceSequence``), the same for
every endpoint it goes to: reserved by ``OUTBOX_STORE`` (one store class per database).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from notifyflow import db
from notifyflow.caching import ProcessCache
from notifyflow.celery import send_task_on_commit
from notifyflow.ids import uuid7

from .models import DELIVERY_FAMILY, InstanceSequence, WebhookEndpoint, WebhookMessage

# The deliverer (``status_webhooks.tasks``), sent by name.
DELIVER_TASK = "notifyflow.deliver_status_webhooks"
# After-commit kicks of the deliverer are coalesced to one per this many seconds per
# process, plus one trailing kick, so a burst of events costs a few tasks, not one each.
KICK_EVERY_S = 0.1


@dataclass(frozen=True)
class NewEvent:
    """An event to report: ``type`` (models.EVENT_TYPES), its ``data`` (JSON-able), the
    instance it is about (which gives it a ``sequence``) and that instance's workflow
    key (endpoints may narrow to workflows)."""

    type: str
    data: Mapping[str, Any] = field(default_factory=dict)
    instance_id: uuid.UUID | str | None = None
    workflow_key: str = ""


def wants(endpoint: WebhookEndpoint, *, event_type: str, workflow_key: str) -> bool:
    """Whether an active endpoint subscribes to ``event_type`` for ``workflow_key``. An
    event that belongs to no workflow goes to every endpoint of its type."""
    types = endpoint.event_types or []
    if event_type not in types and not (
        event_type.startswith("delivery.") and DELIVERY_FAMILY in types
    ):
        return False
    return not endpoint.workflows or not workflow_key or workflow_key in endpoint.workflows


def _json(data: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def record(*, events: Sequence[NewEvent], at: datetime | None = None) -> int:
    """Write the messages of ``events`` in the caller's transaction (a savepoint if there
    is one, else a transaction of its own) and kick the deliverer after commit. Returns
    how many messages were written: none when no active endpoint wants the events."""
    if not events:
        return 0
    endpoints = list(
        WebhookEndpoint.objects.filter(is_active=True).only("id", "event_types", "workflows")
    )
    matched = [
        (event, targets)
        for event in events
        if (
            targets := [
                e
                for e in endpoints
                if wants(e, event_type=event.type, workflow_key=event.workflow_key)
            ]
        )
    ]
    if not matched:
        return 0
    now = at or timezone.now()
    with transaction.atomic():
        next_sequence = _allocate(Counter(_id(e.instance_id) for e, _ in matched if e.instance_id))
        rows = []
        for event, targets in matched:
            data = _json(event.data)
            sequence = None
            if event.instance_id:
                instance_id = _id(event.instance_id)
                sequence = next_sequence[instance_id]
                next_sequence[instance_id] += 1
                data = {**data, "instance_id": instance_id, "sequence": sequence}
            event_id = uuid7()
            rows += [
                WebhookMessage(
                    endpoint_id=endpoint.pk,
                    event_id=event_id,
                    type=event.type,
                    instance_id=event.instance_id,
                    sequence=sequence,
                    workflow_key=event.workflow_key[:100],
                    data=data,
                    created_at=now,
                    next_attempt_at=now,
                )
                for endpoint in targets
            ]
        WebhookMessage.objects.bulk_create(rows, batch_size=1000)
    kick_on_commit()
    return len(rows)


def _allocate(counts: Mapping[str, int]) -> dict[str, int]:
    """Reserve ``counts[id]`` sequence numbers for each instance: the first of each."""
    if not counts:
        return {}
    reserved = OUTBOX_STORE.reserve_sequences(counts)
    return {_id(i): last - counts[_id(i)] + 1 for i, last in reserved}


def _id(value: uuid.UUID | str) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))


# --- the stores: reserving sequence numbers --------------------------------------------


class OutboxStore(Protocol):
    def reserve_sequences(self, counts: Mapping[str, int]) -> list[tuple[Any, int]]:
        """Move each instance's last ``sequence`` on by ``counts[id]``, in id order (two
        transactions reserving for the same instances cannot deadlock); each instance's
        id with its new last number."""
        ...


_SEQUENCES = InstanceSequence._meta.db_table
_RESERVE = (
    f'INSERT INTO "{_SEQUENCES}" ("instance_id", "last") {{rows}} ON CONFLICT ("instance_id") '
    f'DO UPDATE SET "last" = "{_SEQUENCES}"."last" + EXCLUDED."last"'
    ' RETURNING "instance_id", "last"'
)
# Every instance's reservation in one statement: two arrays, ids and counts.
RESERVE_MANY = _RESERVE.format(rows="SELECT * FROM unnest(%s::uuid[], %s::int[])")
# One instance's reservation: id, count.
RESERVE_ONE = _RESERVE.format(rows="VALUES (%s, %s)")


class PostgresOutboxStore(OutboxStore):
    def reserve_sequences(self, counts: Mapping[str, int]) -> list[tuple[Any, int]]:
        ids = sorted(counts)
        with connection.cursor() as cursor:
            cursor.execute(RESERVE_MANY, [ids, [counts[i] for i in ids]])
            return cursor.fetchall()


class OrmOutboxStore(OutboxStore):
    """One statement per instance (SQLite has no arrays)."""

    def reserve_sequences(self, counts: Mapping[str, int]) -> list[tuple[Any, int]]:
        reserved = []
        with connection.cursor() as cursor:
            for instance_id in sorted(counts):
                pk = InstanceSequence._meta.pk.get_db_prep_value(uuid.UUID(instance_id), connection)
                cursor.execute(RESERVE_ONE, [pk, counts[instance_id]])
                reserved.append((instance_id, cursor.fetchone()[1]))
        return reserved


OUTBOX_STORE: OutboxStore = db.per_database(postgres=PostgresOutboxStore, other=OrmOutboxStore)


# --- kicking the deliverer -------------------------------------------------------------

_endpoints_exist: ProcessCache[bool] = ProcessCache(name="active endpoints", maxsize=1, ttl_s=2.0)
_kick_lock = threading.Lock()
_last_kick = 0.0
_trailing_at = 0.0


def any_active_endpoint() -> bool:
    """Whether some endpoint is active (cached 2 s): only decides whether a statement
    that may have written messages kicks the deliverer; the sweeper delivers what a
    missed kick left."""
    cached = _endpoints_exist.get("any")
    if cached is None:
        cached = WebhookEndpoint.objects.filter(is_active=True).exists()
        _endpoints_exist.put("any", cached)
    return cached


def kick_on_commit() -> None:
    """Start the deliverer once the surrounding transaction commits (at once outside
    one), coalesced: every event committed before a kick's task starts is delivered by
    it, so a suppressed kick is covered by a trailing one at the end of the interval."""
    transaction.on_commit(_kick)


def _kick() -> None:
    global _last_kick, _trailing_at
    now = time.monotonic()
    with _kick_lock:
        if now >= _last_kick + KICK_EVERY_S:
            _last_kick, countdown = now, None
        elif _trailing_at <= now:
            _trailing_at = _last_kick + KICK_EVERY_S
            _last_kick, countdown = _trailing_at, _trailing_at - now
        else:
            return
    send_task_on_commit(DELIVER_TASK, countdown=countdown)
