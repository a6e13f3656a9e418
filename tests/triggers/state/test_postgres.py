"""The claim is served by the primary key even when statistics call the queue empty."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import TriggerInstanceFactory, WorkflowFactory, bulk_instances
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]


def test_claim_update_uses_the_primary_key_with_stale_statistics(settings):
    """The claim's statement, as it ran, planned again by EXPLAIN with the statistics
    of an empty queue: it probes the primary key, not the due-queue index."""
    settings.NOTIFYFLOW_DB_PREPARE = False  # the statement with its values in the log
    workflow = WorkflowFactory()
    TriggerInstanceFactory.create_batch(50, workflow=workflow, status=TriggerStatus.COMPLETED)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")  # stats: nothing enqueued
    bulk_instances(workflow, {TriggerStatus.ENQUEUED: 500})
    target = TriggerInstance.objects.filter(status=TriggerStatus.ENQUEUED).last()
    with CaptureQueriesContext(connection) as captured:
        assert state.claim(instance_id=target.pk, worker="w", now=timezone.now()) is not None
    [claim_sql] = [q["sql"] for q in captured.captured_queries if "UPDATE" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + claim_sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "triggers_triggerinstance_pkey" in plan, plan
    assert "trigger_due_enqueued" not in plan, plan


def test_the_prepared_claims_generic_plan_uses_the_primary_key(settings):
    """The claim runs as a prepared statement (notifyflow/db.py), which PostgreSQL
    plans once without the parameters' values: that generic plan, too, must probe the
    primary key and not walk the due backlog."""
    from executions import engine

    settings.NOTIFYFLOW_DB_PREPARE = True
    workflow = WorkflowFactory()
    bulk_instances(workflow, {TriggerStatus.COMPLETED: 3000, TriggerStatus.ENQUEUED: 500})
    due = TriggerInstanceFactory.create_batch(10, workflow=workflow)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")
        cursor.execute("SET plan_cache_mode = force_generic_plan")
    for instance in due[:10]:
        assert engine.claim(instance_id=instance.pk, worker="w") is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, array_length(parameter_types, 1) FROM pg_prepared_statements"
            " WHERE statement LIKE 'WITH moved AS (UPDATE%%' AND statement LIKE '%%LEFT JOIN%%'"
        )
        [(name, nparams)] = cursor.fetchall()
        # Any values will do: the plan is generic.
        cursor.execute(f"EXPLAIN EXECUTE {name}({', '.join(['NULL'] * nparams)})")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET plan_cache_mode")
    assert "triggers_triggerinstance_pkey" in plan, plan
    assert "trigger_due_enqueued" not in plan, plan
    assert "Seq Scan on triggers_triggerinstance" not in plan, plan


def test_a_claimed_instance_reads_every_field_as_its_row_does():
    """The claim returns only what a step reads and knows what it wrote; whatever it
    did not return still reads right (from the row) when asked for."""
    instance = TriggerInstanceFactory(last_error="an earlier attempt's error", attempts=1)
    claimed = state.claim(instance_id=instance.pk, worker="w-1", now=timezone.now())
    assert claimed is not None
    row = TriggerInstance.objects.get(pk=instance.pk)
    for field in TriggerInstance._meta.concrete_fields:
        assert getattr(claimed, field.attname) == getattr(row, field.attname), field.name
    assert (claimed.status, claimed.locked_by) == (TriggerStatus.PROCESSING, "w-1")
