"""GET /api/v1/workflows/{key}/stats/: instances per status and, per node,
executions, successes and failures over every version."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from executions.models import StepExecutionLog
from executions.selectors import step_counts_by_node
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from triggers.models import TriggerStatus
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db
URL = "/api/v1/workflows/{}/stats/"


def _log(instance, node_id: str, success: bool, version: int = 1) -> None:
    now = timezone.now()
    StepExecutionLog.objects.create(
        trigger=instance,
        workflow=instance.workflow,
        workflow_version=version,
        node_id=node_id,
        node_type="email",
        attempt=1,
        started_at=now,
        finished_at=now,
        success=success,
    )


def test_stats_count_instances_per_status_and_executions_per_node_over_all_versions(api):
    workflow = WorkflowFactory(definition=email_sms_definition(delay="1h"))
    old = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.COMPLETED)
    for _ in range(2):
        _log(old, "hello", True)
    _log(old, "hello", False)
    _log(old, "wait", True)
    # Version 2 drops "wait" and adds "extra"; both still show up.
    definition = email_sms_definition()
    definition["nodes"].append({"id": "extra", "type": "sms", "config": {"to": "x", "body": "y"}})
    definition["edges"].append({"from": "text", "to": "extra"})
    workflow = workflow_save(key=workflow.key, name=workflow.name, definition=definition)
    new = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.FAILED)
    _log(new, "text", False, version=2)
    TriggerInstanceFactory(workflow=workflow)
    other = TriggerInstanceFactory(workflow=WorkflowFactory())
    _log(other, "hello", True)  # another workflow's logs are not counted

    response = api.get(URL.format(workflow.key))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["instances"] == {
        "enqueued": 1,
        "processing": 0,
        "completed": 1,
        "failed": 1,
        "cancelled": 0,
    }
    assert body["nodes"] == [
        {"node_id": "hello", "executions": 3, "successes": 2, "failures": 1},
        {"node_id": "text", "executions": 1, "successes": 0, "failures": 1},
        {"node_id": "extra", "executions": 0, "successes": 0, "failures": 0},
        {"node_id": "wait", "executions": 1, "successes": 1, "failures": 0},
    ]


def test_stats_cost_four_queries_whatever_the_volume(api):
    workflow = WorkflowFactory()
    instance = TriggerInstanceFactory(workflow=workflow)
    api.get(URL.format(workflow.key))  # warm the API-key cache
    for _ in range(30):
        _log(instance, "hello", True)
    with CaptureQueriesContext(connection) as queries:
        assert api.get(URL.format(workflow.key)).json()["nodes"][0]["executions"] == 30
    # The workflow, its instances, its step logs, and its test sends (none here).
    assert len(queries) == 4


def test_stats_of_an_unknown_workflow_is_404_and_need_a_key(api, client):
    response = api.get(URL.format("nope"))
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert client.get(URL.format(WorkflowFactory().key)).status_code == 401


@pytest.mark.postgres
def test_per_node_counts_are_an_index_only_scan_on_postgresql():
    # The stats' own query, parking rows left out by the partial index's condition.
    workflow = WorkflowFactory()
    queryset = step_counts_by_node(workflow_id=workflow.pk)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = queryset.explain()
    assert "steplog_workflow_node_success" in plan, plan


def test_stats_leave_test_sends_out(api):
    workflow = WorkflowFactory()
    real = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.COMPLETED)
    test = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.COMPLETED, is_test=True)
    _log(real, "hello", True)
    _log(test, "hello", True)
    _log(test, "text", False)

    body = api.get(URL.format(workflow.key)).json()

    assert body["instances"]["completed"] == 1
    by_node = {node["node_id"]: node for node in body["nodes"]}
    assert by_node["hello"] == {"node_id": "hello", "executions": 1, "successes": 1, "failures": 0}
    assert by_node["text"]["executions"] == 0 and by_node["text"]["failures"] == 0
