"""The claim is served by the primary key even when statistics call the queue empty."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from triggers.models import TriggerInstance, TriggerStatus
from triggers.state import _update_sql as update_sql

from .factories import TriggerInstanceFactory, WorkflowFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_claim_update_uses_the_primary_key_with_stale_statistics():
    workflow = WorkflowFactory()
    TriggerInstanceFactory.create_batch(50, workflow=workflow, status=TriggerStatus.COMPLETED)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")  # stats: nothing enqueued
    now = timezone.now()
    TriggerInstance.objects.bulk_create(
        [
            TriggerInstance(
                workflow=workflow,
                workflow_version=workflow.current_version,
                idempotency_key=f"due-{n}",
                payload={},
                current_node_id="hello",
                available_at=now,
                status=TriggerStatus.ENQUEUED,
            )
            for n in range(500)
        ]
    )
    target = TriggerInstance.objects.filter(status=TriggerStatus.ENQUEUED).last()
    sql, params = update_sql(
        {"pk": target.pk, "status": TriggerStatus.ENQUEUED, "available_at__lte": now},
        {
            "status": TriggerStatus.PROCESSING,
            "lease_token": uuid.uuid4(),
            "locked_until": now,
            "updated_at": now,
        },
    )
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "triggers_triggerinstance_pkey" in plan, plan
    assert "trigger_due_enqueued" not in plan, plan
