"""Event delivery by subject probes the instances' primary key with the interested ids,
however many unfinished instances there are (bench scenario 4: event delivery at 1M
rows). A plan that starts from the instances' status index instead walks every
unfinished instance and probes its interests."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.factories import WorkflowFactory, bulk_instances
from triggers import inbox
from triggers.models import TriggerStatus
from triggers.models.inbox import Interest

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _delivery_statement(subject: str) -> tuple[str, list[object]]:
    """The INSERT ... SELECT deliver() runs, captured and not executed."""
    captured: list[tuple[str, list[object]]] = []

    def capture(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if sql.startswith("INSERT INTO") and "inbox" in sql:
            captured.append((sql, list(params)))
            raise _Captured
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture), pytest.raises(_Captured):
        inbox.deliver(name="reply", event_id="e1", context={}, subjects=[subject])
    [statement] = captured
    return statement


class _Captured(Exception):
    pass


def test_delivery_by_subject_probes_the_primary_key_with_many_waiting_instances():
    workflow = WorkflowFactory()
    # Many unfinished instances, each with a subject of its own; one subject names two of
    # them and many finished instances (a campaign that has mostly run). Statistics then
    # say "the subject matches many rows": the IN (subquery) form was planned from the
    # status index, walking every unfinished instance.
    instances = bulk_instances(
        workflow, {TriggerStatus.ENQUEUED: 3000, TriggerStatus.COMPLETED: 20000}
    )
    Interest.objects.bulk_create(
        [Interest(instance=instance, subject=f"user:{n}") for n, instance in enumerate(instances)]
        + [Interest(instance=instances[1], subject="user:0")]
        + [Interest(instance=instance, subject="user:0") for instance in instances[3000:]]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")
        cursor.execute("ANALYZE triggers_interest")

    sql, params = _delivery_statement("user:0")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "triggers_triggerinstance_pkey" in plan, plan
    assert "Seq Scan on triggers_triggerinstance" not in plan, plan
    assert "trigger_status_created" not in plan, plan
    assert "trigger_workflow_status" not in plan, plan

    # And the statement does what it says: both interested, unfinished instances.
    delivered = inbox.deliver(name="reply", event_id="e1", context={}, subjects=["user:0"])
    assert sorted(map(str, delivered.instance_ids)) == sorted(
        [str(instances[0].pk), str(instances[1].pk)]
    )
