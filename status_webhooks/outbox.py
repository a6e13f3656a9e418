"""The outbox of status events (SPEC §15): written in the transaction of the change it
reports, so nothing is reported that did not happen and nothing that happened is left
unreported; delivered after commit (``delivery``).

``record`` is the one writer of messages for Python callers (set-based: a cancellation
of thousands writes their events in a few statements). ``instance_events_select`` is
the same write for PostgreSQL's one-statement transitions (``triggers.state``): an
expression of the statement's SELECT calling a PL/pgSQL writer only when some endpoint
is active, each event guarded by the statement's test of whether its change applied
(the state machine builds it: ``state.transition(events=...)``). Each event about an
instance takes that instance's next ``sequence`` (``InstanceSequence``), the same for
every endpoint it goes to.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cachetools import TTLCache
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

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
    """Reserve ``counts[id]`` sequence numbers for each instance: the first of each. In
    id order, so two transactions reserving for the same instances cannot deadlock."""
    if not counts:
        return {}
    table = InstanceSequence._meta.db_table
    upsert = (
        f'INSERT INTO "{table}" ("instance_id", "last") {{rows}} ON CONFLICT ("instance_id") '
        f'DO UPDATE SET "last" = "{table}"."last" + EXCLUDED."last" RETURNING "instance_id", "last"'
    )
    ids = sorted(counts)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = "SELECT * FROM unnest(%s::uuid[], %s::int[])"
            cursor.execute(upsert.format(rows=rows), [ids, [counts[i] for i in ids]])
            reserved = cursor.fetchall()
        else:
            reserved = []
            for instance_id in ids:
                pk = InstanceSequence._meta.pk.get_db_prep_value(uuid.UUID(instance_id), connection)
                cursor.execute(upsert.format(rows="VALUES (%s, %s)"), [pk, counts[instance_id]])
                reserved.append((instance_id, cursor.fetchone()[1]))
    return {_id(i): last - counts[_id(i)] + 1 for i, last in reserved}


def _id(value: uuid.UUID | str) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))


# --- PostgreSQL: the same write inside a transition's one statement --------------------

_E = WebhookEndpoint._meta.db_table


def instance_events_select(
    *, events: Sequence[tuple[NewEvent, str]], at: datetime
) -> tuple[str, list[Any]]:
    """``(sql, params)``: an expression for the SELECT list of a PostgreSQL statement
    that writes the messages of several events of ONE instance, each event written when
    its guard (SQL) holds: the instance's sequence moves once by the number of wanted
    events, which take the numbers in the order given (``notifyflow_webhook_events``,
    status_webhooks migration 0002). The writer is called only when some endpoint is
    active: with none, the statement pays one look at the endpoint table. Its value is
    how many messages were written (NULL: no endpoint)."""
    first = events[0][0]
    assert first.instance_id is not None
    instance_id = str(first.instance_id)
    items = []
    for event, _ in events:
        assert event.instance_id is not None and str(event.instance_id) == instance_id
        items.append({"type": event.type, "data": {**event.data, "instance_id": instance_id}})
    params = [instance_id, first.workflow_key[:100], at, _ENCODER.encode(items)]
    return _events_sql(tuple(guard for _, guard in events)), params


# The events' data as JSON text (dates, UUIDs, decimals as Django's encoder writes them).
_ENCODER = DjangoJSONEncoder()


@functools.cache
def _events_sql(guards: tuple[str, ...]) -> str:
    """The call for events with these guards, built once per shape (a step's statements
    come in a handful)."""
    return (
        f'CASE WHEN EXISTS (SELECT 1 FROM "{_E}" e WHERE e."is_active")'
        " THEN notifyflow_webhook_events(%s::uuid, %s, %s, %s::jsonb,"
        f" ARRAY[{', '.join(guards)}]) END"
    )


# --- kicking the deliverer -------------------------------------------------------------

_endpoints_exist: TTLCache[str, bool] = TTLCache(maxsize=1, ttl=2.0)
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
        _endpoints_exist["any"] = cached
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
