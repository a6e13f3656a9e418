"""The instance table's indexes are exactly the declared ones.

A step's claim and outcome change ``status``, so every UPDATE writes an entry into
every index of the table: an index that serves no query is paid for on every step.
Adding one must be a decision (in ``TriggerInstance.Meta``, commented with the query it
serves), not a side effect of a field option."""

from __future__ import annotations

import pytest
from django.db import connection

from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db


def _index_columns() -> set[tuple[str, ...]]:
    """Column lists of the plain indexes (not the primary key or unique constraints)."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(
            cursor, TriggerInstance._meta.db_table
        )
    return {
        tuple(info["columns"])
        for info in constraints.values()
        if info["index"] and not info["unique"] and not info["primary_key"]
    }


def test_instance_table_indexes_are_the_declared_ones() -> None:
    assert _index_columns() == {
        ("available_at",),  # trigger_due_enqueued, trigger_enqueued_undispatched (partial)
        ("locked_until",),  # trigger_lease_processing (partial)
        ("workflow_id", "status", "created_at"),  # trigger_workflow_status
        ("status", "created_at"),  # trigger_status_created
        ("idempotency_key",),  # trigger_idempotency_key
        ("finished_at",),  # trigger_failed_finished (partial)
        ("created_at",),  # default order of the admin and the API
    }


def test_foreign_keys_have_no_index_of_their_own() -> None:
    columns = _index_columns()
    assert ("workflow_id",) not in columns
    assert ("workflow_version_id",) not in columns
