"""Immutable history in the database (issue 12 item 6): on PostgreSQL, step logs, status
changes and event records reject UPDATE and DELETE except through the purge; workflows
PROTECT their history instead of cascading."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import ProtectedError

from executions import engine
from executions.models import StepExecutionLog
from tests.factories import PAYLOAD, WorkflowFactory
from triggers.models import TriggerStatusChange
from triggers.models.events import EventRecord
from triggers.services import trigger_create
from workflows.models import Workflow, WorkflowVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(dispatched):
    # Created through the service: its creation is an audit row (a routine step's claim
    # and release are not: their step log records them).
    instance = trigger_create(
        workflow=WorkflowFactory(), idempotency_key="history", payload=PAYLOAD
    ).instance
    engine.step_execute(instance_id=instance.pk)
    EventRecord.objects.create(name="E", context_sha256="0" * 64)
    return instance


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("model", "change"),
    [
        (StepExecutionLog, {"error": "rewritten"}),
        (TriggerStatusChange, {"reason": "rewritten"}),
        (EventRecord, {"name": "rewritten"}),
    ],
)
def test_history_rows_cannot_be_updated_or_deleted_in_the_database(history, model, change):
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        model.objects.all().update(**change)
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        model.objects.all()._raw_delete(model.objects.db)
    assert model.objects.exists()


@pytest.mark.postgres
def test_only_the_purge_path_may_delete_history(history):
    with transaction.atomic(), connection.cursor() as cursor:
        # What the purge path sets (triggers.retention): the history triggers' one exception.
        cursor.execute("SET LOCAL notifyflow.purge = on")
        StepExecutionLog.objects.filter(trigger=history)._raw_delete(StepExecutionLog.objects.db)
        with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
            TriggerStatusChange.objects.update(reason="still no updates")
    assert not StepExecutionLog.objects.filter(trigger=history).exists()


def test_deleting_a_workflow_does_not_cascade_to_its_history(history):
    workflow = Workflow.objects.get(pk=history.workflow_id)
    with pytest.raises(ProtectedError):
        workflow.delete()
    assert StepExecutionLog.objects.filter(workflow=workflow).exists()
    assert WorkflowVersion.objects.filter(workflow=workflow).exists()


def test_workflow_versions_and_step_logs_protect_the_workflow():
    for model in (StepExecutionLog, WorkflowVersion):
        field = model._meta.get_field("workflow")
        assert field.remote_field.on_delete.__name__ == "PROTECT"
