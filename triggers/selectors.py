"""Reads of trigger instances for operations (metrics, readiness). They never write."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count, Min, Q
from django.utils import timezone

from notifyflow.errors import NotFoundError
from notifyflow.metrics import LaneFigures, QueueFigures
from workflows.models import Priority, Workflow, WorkflowVersion

from .models import TriggerInstance, TriggerStatus

S = TriggerStatus


def queue_figures(*, now: datetime | None = None) -> QueueFigures:
    """Unfinished instances by status, the due backlog and the oldest due instance's
    age, in all and per lane (every lane, most urgent first).

    Two aggregates, each over a partial index that holds only unfinished rows and every
    column it reads (index-only): trigger_due_enqueued (status = 'enqueued', by
    available_at, INCLUDE lane) grouped by lane, and trigger_lease_processing (status =
    'processing', by locked_until). Finished instances cost nothing, however many there
    are.
    """
    now = now or timezone.now()
    per_lane = (
        TriggerInstance.objects.filter(status=S.ENQUEUED)
        .values("lane")
        .order_by()
        .annotate(
            total=Count("available_at"),
            due=Count("available_at", filter=Q(available_at__lte=now)),
            oldest=Min("available_at", filter=Q(available_at__lte=now)),
        )
    )
    found = {row["lane"]: row for row in per_lane}
    processing = TriggerInstance.objects.filter(status=S.PROCESSING).aggregate(
        total=Count("locked_until")
    )["total"]
    lanes = {
        lane: LaneFigures(
            due_backlog=found[lane]["due"] if lane in found else 0,
            oldest_due_age_s=_age(now, found[lane]["oldest"] if lane in found else None),
        )
        for lane in Priority.values
    }
    oldest = min((row["oldest"] for row in found.values() if row["oldest"]), default=None)
    return QueueFigures(
        by_status={
            S.ENQUEUED: sum(row["total"] for row in found.values()),
            S.PROCESSING: processing,
        },
        due_backlog=sum(lane.due_backlog for lane in lanes.values()),
        oldest_due_age_s=_age(now, oldest),
        lanes=lanes,
    )


def _age(now: datetime, since: datetime | None) -> float:
    return max(0.0, (now - since).total_seconds()) if since else 0.0


def instance_by_key(*, workflow: Workflow, idempotency_key: str) -> TriggerInstance | None:
    """The instance of (workflow, idempotency_key), with ``workflow`` and its version
    attached (no further query to render it), or None.

    The hot read of every POST /triggers/: one probe of the unique index, by a statement
    built once per process (compiling the ORM's select_related query is a large share of
    a POST: bench/README.md). Only the version's number is read, not its definition:
    the current version is ``workflow``'s own; an older one comes back deferred.
    """
    with connection.cursor() as cursor:
        cursor.execute(by_key_sql(), [workflow.pk, idempotency_key])
        row = cursor.fetchone()
    return None if row is None else instance_from_row(workflow, row)


def instance_from_row(workflow: Workflow, row: Sequence[Any]) -> TriggerInstance:
    """The instance read by ``by_key_sql()`` (its columns, then the version number)."""
    values = list(row[:-1])
    for index, converters, column in _converters():
        for convert in converters:
            values[index] = convert(values[index], column, connection)
    instance = TriggerInstance.from_db(connection.alias, _ATTNAMES, values)
    instance.workflow = workflow
    if instance.workflow_version_id == workflow.current_version_id and workflow.current_version:
        instance.workflow_version = workflow.current_version
    else:
        instance.workflow_version = WorkflowVersion.from_db(
            connection.alias, ["id", "version"], [instance.workflow_version_id, row[-1]]
        )
    return instance


_ATTNAMES = [f.attname for f in TriggerInstance._meta.concrete_fields]
_by_key: list[str] = []
_by_key_converters: list[list[tuple[int, list[Any], Any]]] = []


def _converters() -> list[tuple[int, list[Any], Any]]:
    """What the ORM's compiler applies to each column read (JSON decoding, SQLite's
    datetimes and UUIDs), per column that has any."""
    if not _by_key_converters:
        found = []
        for index, field in enumerate(TriggerInstance._meta.concrete_fields):
            column = field.get_col(TriggerInstance._meta.db_table)
            converters = connection.ops.get_db_converters(column) + field.get_db_converters(
                connection
            )
            if converters:
                found.append((index, converters, column))
        _by_key_converters.append(found)
    return _by_key_converters[0]


def by_key_sql() -> str:
    """``SELECT`` the instance of (workflow id, idempotency key) - two parameters - and
    its version's number; ``instance_from_row`` makes the instance of its row."""
    if not _by_key:
        meta, version_meta = TriggerInstance._meta, WorkflowVersion._meta
        columns = ", ".join(f't."{f.column}"' for f in meta.concrete_fields)
        version_fk = meta.get_field("workflow_version").column
        _by_key.append(
            f'SELECT {columns}, v."{version_meta.get_field("version").column}"'
            f' FROM "{meta.db_table}" t JOIN "{version_meta.db_table}" v'
            f' ON v."{version_meta.pk.column}" = t."{version_fk}"'
            f' WHERE t."{meta.get_field("workflow").column}" = %s'
            f' AND t."{meta.get_field("idempotency_key").column}" = %s'
            # The payload-only instance of the key (a trigger naming
            # recipients has one instance per recipient under the same key).
            f' AND t."{meta.get_field("recipient").column}" IS NULL'
            f' AND NOT t."{meta.get_field("recipient_erased").column}"'
        )
    return _by_key[0]


def instance_or_404(instance_id: uuid.UUID | str) -> TriggerInstance:
    """The instance with its workflow and version; NotFoundError if there is none."""
    instance = (
        TriggerInstance.objects.select_related("workflow", "workflow_version")
        .filter(pk=instance_id)
        .first()
    )
    if instance is None:
        raise NotFoundError(code="not_found", field=None, message="no such trigger instance")
    return instance
