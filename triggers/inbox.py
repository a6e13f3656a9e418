"""Events reaching running instances: interests, the inbox, waking waiting
instances, ``cancel_on``. (A wait's consumption of an event and an ``emit`` node's
outbox row are written with the step's outcome: ``executions.recording``; the outbox
is processed by ``triggers.outbox``.)

Delivery is one set-based INSERT ... SELECT over the interest index, in the caller's
transaction; waking happens after commit, and a wait node re-checks its inbox after it
parks (executions.engine), so an event is never missed whichever commits first:
- the event commits before the step's re-check: the re-check sees it and wakes itself;
- it commits after: the wake UPDATE (issued after that commit) sees the parked row.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from notifyflow import db, metrics
from notifyflow.celery import send_tasks_on_commit
from notifyflow.errors import ApplicationError, ConflictError, NotFoundError
from workflows.models import WorkflowVersion
from workflows.templating import TemplateError, condition_holds, render

from . import state
from .dispatch import dispatch_many_on_commit
from .models import InboxEvent, Interest, TriggerInstance, TriggerStatus

logger = logging.getLogger("notifyflow.inbox")
S = TriggerStatus
MAX_SUBJECTS = 100
INSTANCE_SUBJECT = "instance:"
_CHUNK = 500  # ids per IN (...) list (SQLite's parameter limit)


# --- interests ---------------------------------------------------------------------------


def interests_render(
    *, templates: Sequence[str], payload: dict[str, Any], trigger: dict[str, Any]
) -> list[str]:
    """The definition's ``interests`` rendered for a new instance (duplicates and the
    implicit ``instance:<id>`` dropped: that one is matched by id, no row needed).
    Raises ApplicationError (field ``payload``) naming the interest that fails."""
    subjects: list[str] = []
    for index, template in enumerate(templates):
        try:
            subject = render(template, {"payload": payload, "trigger": trigger}).strip()
        except TemplateError as exc:
            raise ApplicationError(
                code="invalid_interest",
                field="payload",
                message=f"payload: interest {index} ({template!r}) does not render: {exc}",
            ) from exc
        if not subject or len(subject) > 255:
            raise ApplicationError(
                code="invalid_interest",
                field="payload",
                message=f"payload: interest {index} ({template!r}) renders to "
                f"{'nothing' if not subject else 'more than 255 characters'}",
            )
        if subject not in subjects and not subject.startswith(INSTANCE_SUBJECT):
            subjects.append(subject)
    return subjects


# --- delivery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivered:
    instance_ids: list[uuid.UUID]

    @property
    def count(self) -> int:
        return len(self.instance_ids)


def deliver(
    *,
    name: str,
    event_id: str | None,
    context: dict[str, Any],
    subjects: Sequence[str],
    received_at: datetime | None = None,
) -> Delivered:
    """Append the event to the inbox of every unfinished instance interested in one of
    ``subjects`` (``instance:<id>`` names one instance), at most once per instance and
    ``event_id``: one INSERT ... SELECT however many match. Then, in the same
    transaction, ``cancel_on`` rules that match cancel; after commit, instances waiting
    for ``name`` become due and are dispatched."""
    received_at = received_at or timezone.now()
    ids = _insert_inbox_rows(name, event_id, context, subjects, received_at)
    metrics.EVENT_DELIVERIES.inc(len(ids))
    if ids:
        _apply_cancel_on(ids, name, event_id, context, received_at)
        transaction.on_commit(lambda: _wake_after_commit(ids, name))
    return Delivered(ids)


# A delivery that reaches more instances than this wakes them from worker tasks, one per
# chunk: a message published per instance, for thousands inline, would hold the request
# for most of a minute (bench: running_deliver). Up to this many, inline: the lowest
# latency.
WAKE_INLINE_MAX = 100
WAKE_TASK = "notifyflow.wake_waiting"


def _wake_after_commit(ids: list[uuid.UUID], event: str) -> None:
    if len(ids) <= WAKE_INLINE_MAX:
        wake_waiting(instance_ids=ids, event=event)
        return
    send_tasks_on_commit(
        WAKE_TASK,
        [
            ([str(i) for i in ids[start : start + _CHUNK]], event)
            for start in range(0, len(ids), _CHUNK)
        ],
    )


def deliver_to_instance(
    *, instance_id: uuid.UUID | str, name: str, event_id: str | None, context: dict[str, Any]
) -> Delivered:
    """``deliver`` to one instance. NotFoundError if unknown; ConflictError
    ``already_finished`` if it has finished (an event for it would never be read)."""
    instance = TriggerInstance.objects.filter(pk=instance_id).only("id", "status").first()
    if instance is None:
        raise NotFoundError(code="not_found", field=None, message="no such trigger instance")
    if instance.is_terminal:
        raise ConflictError(
            code="already_finished",
            field=None,
            message=f"instance {instance.pk} is already {instance.status}",
        )
    with transaction.atomic():
        return deliver(
            name=name,
            event_id=event_id,
            context=context,
            subjects=[f"{INSTANCE_SUBJECT}{instance.pk}"],
        )


_INBOX = InboxEvent._meta
_INTEREST = Interest._meta
_INSTANCE = TriggerInstance._meta


def _column(meta: Any, name: str) -> str:
    return f'"{meta.get_field(name).column}"'


def _insert_inbox_rows(
    name: str,
    event_id: str | None,
    context: dict[str, Any],
    subjects: Sequence[str],
    received_at: datetime,
) -> list[uuid.UUID]:
    """The set-based delivery statement; returns the ids of the instances reached."""
    by_id: list[Any] = []
    by_interest: list[str] = []
    for subject in subjects:
        if subject.startswith(INSTANCE_SUBJECT):
            try:
                by_id.append(uuid.UUID(subject[len(INSTANCE_SUBJECT) :]))
            except ValueError:
                continue
        else:
            by_interest.append(subject)
    if not by_id and not by_interest:
        return []
    pk = _column(_INSTANCE, "id")
    matches = []
    params: list[Any] = [
        name,
        event_id,
        _INBOX.get_field("context").get_db_prep_save(context, connection),
        _INBOX.get_field("received_at").get_db_prep_save(received_at, connection),
    ]
    if by_interest:
        # The interested ids first, as an array the primary key is probed with: a plan
        # that cannot start from the instances' status index instead and probe the
        # interests of every unfinished instance (many waiting, few interested).
        interested = (
            f"SELECT i.{_column(_INTEREST, 'instance')} FROM "
            f'"{_INTEREST.db_table}" i WHERE i.{_column(_INTEREST, "subject")} IN '
            f"({', '.join(['%s'] * len(by_interest))})"
        )
        matches.append(db.in_subquery(f"t.{pk}", interested))
        params += by_interest
    if by_id:
        matches.append(f"t.{pk} IN ({', '.join(['%s'] * len(by_id))})")
        params += [_INSTANCE.pk.get_db_prep_value(value, connection) for value in by_id]
    params += [S.ENQUEUED, S.PROCESSING]
    sql = (
        f'INSERT INTO "{_INBOX.db_table}" ({_column(_INBOX, "instance")}, '
        f"{_column(_INBOX, 'name')}, {_column(_INBOX, 'event_id')}, "
        f"{_column(_INBOX, 'context')}, {_column(_INBOX, 'received_at')}, "
        f"{_column(_INBOX, 'consumed_by_node')}) "
        f"SELECT t.{pk}, %s, %s, %s, %s, '' FROM \"{_INSTANCE.db_table}\" t "
        f"WHERE ({' OR '.join(matches)}) AND t.{_column(_INSTANCE, 'status')} IN (%s, %s) "
        f"ON CONFLICT ({_column(_INBOX, 'instance')}, {_column(_INBOX, 'event_id')}) "
        f"DO NOTHING RETURNING {_column(_INBOX, 'instance')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [value if isinstance(value, uuid.UUID) else uuid.UUID(value) for (value,) in rows]


def wake_waiting(*, instance_ids: Iterable[uuid.UUID | str], event: str) -> int:
    """Instances among ``instance_ids`` parked at a wait for ``event`` become due now and
    are dispatched (a duplicate message for one already running is a harmless no-op)."""
    now = timezone.now()
    ids = list(instance_ids)
    woken: list[Any] = []
    for start in range(0, len(ids), _CHUNK):
        waiting = TriggerInstance.objects.filter(
            pk__in=ids[start : start + _CHUNK],
            status=S.ENQUEUED,
            waiting_for_event=event,
            available_at__gt=now,
        )
        chunk = list(waiting.values_list("id", "lane"))
        if chunk:
            TriggerInstance.objects.filter(
                pk__in=[pk for pk, _ in chunk], status=S.ENQUEUED, waiting_for_event=event
            ).update(available_at=now, dispatched_at=now)
            woken += chunk
    dispatch_many_on_commit(woken)
    return len(woken)


def _apply_cancel_on(
    ids: list[uuid.UUID],
    name: str,
    event_id: str | None,
    context: dict[str, Any],
    received_at: datetime,
) -> None:
    """Cancel the delivered instances whose version's ``cancel_on`` matches the event,
    in the delivery's transaction: a wait on the same event can never win the race."""
    chunks = [ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK)]
    # First only the versions (no payloads): most events cancel nothing.
    version_ids: set[int] = set()
    for chunk in chunks:
        version_ids.update(
            TriggerInstance.objects.filter(pk__in=chunk)
            .order_by()
            .values_list("workflow_version_id", flat=True)
            .distinct()
        )
    rules_by_version = {
        version_id: rules
        for version_id, definition in WorkflowVersion.objects.filter(
            pk__in=version_ids
        ).values_list("id", "definition")
        if (rules := [r for r in definition.get("cancel_on", []) if r["event"] == name])
    }
    if not rules_by_version:
        return
    rows: list[tuple[Any, int, str, dict[str, Any], str]] = []
    for chunk in chunks:
        rows += TriggerInstance.objects.filter(
            pk__in=chunk, workflow_version_id__in=list(rules_by_version)
        ).values_list("id", "workflow_version_id", "status", "payload", "idempotency_key")
    event = _event_json(name, event_id, context, received_at)
    for instance_id, version_id, status, payload, key in rows:
        rules = rules_by_version.get(version_id) or []
        scope = {
            "payload": payload,
            "trigger": {"id": str(instance_id), "idempotency_key": key},
            "event": event,
        }
        if any("match" not in rule or condition_holds(rule["match"], scope) for rule in rules):
            state.cancel(
                instance_id=instance_id,
                from_status=status,
                reason=f"cancel_on event {name!r} ({event_id or 'no event id'})",
                actor=f"event:{name}"[:200],
            )


def _event_json(
    name: str, event_id: str | None, context: dict[str, Any], received_at: datetime
) -> dict[str, Any]:
    return {
        "name": name,
        "event_id": event_id,
        "context": context,
        "received_at": received_at.isoformat(),
    }


def inbox_event_json(event: InboxEvent) -> dict[str, Any]:
    """What a wait node's ``match`` and ``vars.wait_<node>`` see of an event."""
    return _event_json(event.name, event.event_id, event.context, event.received_at)


def pending_events(*, instance_id: uuid.UUID, name: str) -> list[InboxEvent]:
    """Unconsumed events named ``name`` in the instance's inbox, oldest first
    (inbox_pending)."""
    return list(
        InboxEvent.objects.filter(
            instance_id=instance_id, name=name, consumed_at__isnull=True
        ).order_by("received_at", "id")
    )


def has_events_after(*, instance_id: uuid.UUID, name: str, after_id: int) -> bool:
    return InboxEvent.objects.filter(
        instance_id=instance_id, name=name, consumed_at__isnull=True, id__gt=after_id
    ).exists()
