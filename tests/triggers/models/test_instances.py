"""The trigger instance row: what an enqueued instance says it waits for, and the
table's indexes, exactly the declared ones.

A step's claim and outcome change ``status``, so every UPDATE writes an entry into
every index of the table: an index that serves no query is paid for on every step.
Adding one must be a decision (in ``TriggerInstance.Meta``, commented with the query it
serves), not a side effect of a field option."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from notifyflow import db
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = pytest.mark.django_db


def _index_columns() -> list[tuple[str, ...]]:
    """Column lists of the plain indexes (not the primary key or unique constraints),
    INCLUDEd columns after the key ones, sorted (a duplicate index shows twice)."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(
            cursor, TriggerInstance._meta.db_table
        )
    return sorted(
        tuple(info["columns"])
        for info in constraints.values()
        if info["index"] and not info["unique"] and not info["primary_key"]
    )


def test_instance_table_indexes_are_the_declared_ones() -> None:
    # SQLite has no INCLUDE: there the lane is read from the row.
    covering = connection.features.supports_covering_indexes
    assert _index_columns() == sorted(
        [
            ("available_at",),  # trigger_enqueued_undispatched (partial)
            ("available_at", "lane") if covering else ("available_at",),  # trigger_due_enqueued
            ("workflow_id", "concurrency_key"),  # trigger_concurrency_running (partial)
            ("locked_until",),  # trigger_lease_processing (partial)
            ("workflow_id", "status", "created_at"),  # trigger_workflow_status
            ("workflow_id", "status"),  # trigger_test_workflow_status (partial)
            ("status", "created_at"),  # trigger_finished_status (partial: finished rows)
            ("idempotency_key",),  # trigger_idempotency_key
            ("finished_at",),  # trigger_failed_finished (partial)
            ("finished_at",),  # trigger_finished_at (partial: finished rows, retention)
            ("created_at",),  # default order of the admin and the API
        ]
    )


def _indexes_holding(instance: TriggerInstance) -> set[str]:
    """The instance table's indexes that hold an entry for ``instance``'s row: every
    index without a WHERE, and each partial one whose WHERE the row satisfies."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass",
            [TriggerInstance._meta.db_table],
        )
        indexes = cursor.fetchall()
        holding = set()
        for name, predicate in indexes:
            if predicate is not None:
                cursor.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {TriggerInstance._meta.db_table}"
                    f" WHERE id = %s AND ({predicate}))",
                    [instance.pk],
                )
                if not cursor.fetchone()[0]:
                    continue
            holding.add(name)
    return holding


@pytest.mark.postgres
def test_a_steps_updates_write_no_entry_into_the_finished_row_indexes() -> None:
    """A claim and a step's outcome change ``status``: no HOT update, so each writes an
    entry into every index its row's new version is in. The list-by-status and
    retention indexes hold finished rows only: an instance enters them once, when it
    finishes."""
    now = timezone.now()
    instance = TriggerInstanceFactory(available_at=now, dispatched_at=now)
    always = {
        "triggers_triggerinstance_pkey",
        "trigger_unique_workflow_idempotency_key",
        "trigger_workflow_status",
        "trigger_idempotency_key",
        next(
            name
            for name, info in connection.introspection.get_constraints(
                connection.cursor(), TriggerInstance._meta.db_table
            ).items()
            if info["columns"] == ["created_at"] and info["index"]
        ),
    }
    assert _indexes_holding(instance) == always | {"trigger_due_enqueued"}

    claimed = state.claim(instance_id=instance.pk, worker="w1", now=now)
    assert claimed is not None
    assert _indexes_holding(claimed) == always | {"trigger_lease_processing"}

    TriggerInstance.objects.filter(pk=instance.pk).update(
        status=TriggerStatus.COMPLETED,
        lease_token=None,
        locked_until=None,
        finished_at=now,
    )
    instance.refresh_from_db()
    assert _indexes_holding(instance) == always | {
        "trigger_finished_status",
        "trigger_finished_at",
    }


def _key_count(cursor, name: str, columns: list[str]) -> int:
    """How many of an index's columns are its key (the rest are INCLUDEd)."""
    if not db.is_postgres():
        return len(columns)
    cursor.execute(
        "SELECT i.indnkeyatts FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        [name],
    )
    row = cursor.fetchone()
    return row[0] if row else len(columns)


def _is_partial(cursor, name: str) -> bool:
    """Whether an index covers only the rows of its WHERE (a partial index)."""
    if not db.is_postgres():
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [name])
        row = cursor.fetchone()
        return bool(row and row[0] and " WHERE " in row[0].upper())
    cursor.execute(
        "SELECT i.indpred IS NOT NULL FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        [name],
    )
    row = cursor.fetchone()
    return bool(row and row[0])


def test_no_index_is_the_leading_part_of_another() -> None:
    """On every table of the project: an index whose columns begin another index
    (a foreign key's own index, typically) serves no query the longer one does not, and
    hot tables pay for it on every row a step writes. A partial index leads nothing, and
    nothing leads it: it holds only the rows of its WHERE, which a longer index over all
    rows finds only by reading every other row of the same key too."""
    project_apps = {
        config.label for config in apps.get_app_configs() if config.models_module is not None
    } - {"admin", "auth", "contenttypes", "sessions", "axes", "django_celery_beat"}
    redundant = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            if model._meta.app_label not in project_apps:
                continue
            constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
            # An index's INCLUDE columns are carried, not searched: only its key columns
            # can lead another index.
            for name, info in constraints.items():
                info["columns"] = info["columns"][: _key_count(cursor, name, info["columns"])]
            plain = {
                name: tuple(info["columns"])
                for name, info in constraints.items()
                # An expression index (Lower(email)) names no columns: nothing to compare.
                if info["index"]
                and not info["unique"]
                and not info["primary_key"]
                and info["columns"]
                and not _is_partial(cursor, name)
            }
            every = [
                tuple(info["columns"])
                for name, info in constraints.items()
                if info["columns"] and not _is_partial(cursor, name)
            ]
            redundant += [
                (model._meta.db_table, name)
                for name, columns in plain.items()
                # An expression index (Lower("email")) lists no column: nothing it leads.
                if columns
                and any(
                    len(other) > len(columns) and other[: len(columns)] == columns
                    for other in every
                )
            ]
    assert redundant == []


def test_waiting_on_says_what_an_enqueued_instance_waits_for():
    now = timezone.now()
    later = now + timedelta(hours=1)
    wf = WorkflowFactory()

    def waiting(**fields):
        instance = TriggerInstance(workflow=wf, available_at=later, **fields)
        found = instance.waiting_on(now)
        return found and (found.kind, found.until, found.event, found.ends_workflow)

    assert waiting(waiting_for_event="reply", wait_deadline=later) == (
        "event",
        later,
        "reply",
        False,
    )
    assert waiting(wait_deadline=later) == ("delay", later, None, True)
    assert waiting(attempts=2) == ("retry", later, None, False)
    assert waiting() == ("delay", later, None, False)
    assert TriggerInstance(workflow=wf, available_at=now).waiting_on(now) is None
    assert waiting(status=TriggerStatus.PROCESSING) is None
