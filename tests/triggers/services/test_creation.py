"""Creating one trigger instance (``trigger_create``): a new instance is enqueued at the
workflow's entry node on its current version and dispatched after commit; a repeated
key answers the first instance whatever is posted now; an unknown, inactive or empty
workflow is refused naming the field; a key's replay never shows an instance that key
may not read. Runs on both databases (the insert is a per-database statement)."""

from __future__ import annotations

import pytest

from api_keys.models import ApiKeyScope
from api_keys.services import api_key_create
from notifyflow.errors import ApplicationError, ConflictError
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import trigger_create
from workflows.concurrency import Concurrency
from workflows.models import Workflow
from workflows.services import workflow_save

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def test_a_new_instance_is_enqueued_at_the_entry_node_and_dispatched(dispatched):
    wf = WorkflowFactory()
    result = trigger_create(workflow=wf.key, idempotency_key="k1", payload=PAYLOAD, actor="ann")
    assert result.created
    row = TriggerInstance.objects.get()
    assert row.pk == result.instance.pk
    assert (row.status, row.current_node_id, row.payload) == (
        TriggerStatus.ENQUEUED,
        "hello",
        PAYLOAD,
    )
    assert row.workflow_version_id == wf.current_version_id
    assert [instance_id for instance_id, _ in dispatched] == [str(row.pk)]
    change = TriggerStatusChange.objects.get(instance=row)
    assert (change.from_status, change.to_status, change.actor) == ("", "enqueued", "ann")


def test_the_returned_instance_is_the_stored_row(dispatched):
    wf = WorkflowFactory()
    made = trigger_create(workflow=wf, idempotency_key="k1", payload=PAYLOAD).instance
    stored = TriggerInstance.objects.get(pk=made.pk)
    for field in ("workflow_id", "workflow_version_id", "idempotency_key", "status", "lane"):
        assert getattr(made, field) == getattr(stored, field), field
    assert made.workflow.key == wf.key


def test_a_repeated_key_returns_the_first_instance_and_its_payload(dispatched):
    wf = WorkflowFactory()
    first = trigger_create(workflow=wf.key, idempotency_key="k1", payload=PAYLOAD)
    again = trigger_create(workflow=wf.key, idempotency_key="k1", payload={"name": "Bob"})
    assert not again.created and again.instance.pk == first.instance.pk
    assert again.instance.payload == PAYLOAD
    assert TriggerInstance.objects.count() == 1
    assert len(dispatched) == 1  # a replay sends nothing


def test_the_same_key_on_another_workflow_is_another_instance(dispatched):
    one, other = WorkflowFactory(), WorkflowFactory()
    a = trigger_create(workflow=one, idempotency_key="k1", payload=PAYLOAD)
    b = trigger_create(workflow=other, idempotency_key="k1", payload=PAYLOAD)
    assert a.created and b.created and a.instance.pk != b.instance.pk


def test_a_replay_answers_even_after_the_workflow_was_deactivated(dispatched):
    wf = WorkflowFactory()
    first = trigger_create(workflow=wf, idempotency_key="k1", payload=PAYLOAD).instance
    wf.is_active = False
    wf.save()
    again = trigger_create(workflow=wf, idempotency_key="k1", payload=PAYLOAD)
    assert (again.created, again.instance.pk) == (False, first.pk)


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: "no-such-workflow", "unknown_workflow"),
        (lambda: WorkflowFactory(is_active=False), "inactive_workflow"),
        (lambda: Workflow.objects.create(key="empty", name="Empty"), "workflow_has_no_definition"),
    ],
)
def test_a_workflow_that_cannot_start_is_refused_naming_the_field(dispatched, make, code):
    with pytest.raises(ApplicationError) as refused:
        trigger_create(workflow=make(), idempotency_key="k1", payload=PAYLOAD)
    assert (refused.value.code, refused.value.field) == (code, "workflow")
    assert not TriggerInstance.objects.exists() and not dispatched


def test_an_instance_starts_on_the_version_current_when_it_is_created(dispatched):
    wf = WorkflowFactory()
    old = trigger_create(workflow=wf.key, idempotency_key="old", payload=PAYLOAD).instance
    workflow_save(key=wf.key, name=wf.name, definition=email_sms_definition(delay="1h"))
    new = trigger_create(workflow=wf.key, idempotency_key="new", payload=PAYLOAD).instance
    assert new.workflow_version_id != old.workflow_version_id
    assert TriggerInstance.objects.get(pk=old.pk).workflow_version_id == old.workflow_version_id


def test_the_posting_key_is_recorded_and_a_key_that_may_not_read_gets_a_conflict(dispatched):
    wf = WorkflowFactory()
    mine, _ = api_key_create(name="mine", scope=ApiKeyScope.TRIGGER)
    theirs, _ = api_key_create(name="theirs", scope=ApiKeyScope.TRIGGER)
    made = trigger_create(workflow=wf, idempotency_key="k1", payload=PAYLOAD, api_key=mine)
    assert TriggerInstance.objects.get(pk=made.instance.pk).created_by_key == "mine"
    assert trigger_create(workflow=wf, idempotency_key="k1", payload={}, api_key=mine).instance
    with pytest.raises(ConflictError) as refused:
        trigger_create(workflow=wf, idempotency_key="k1", payload={}, api_key=theirs)
    assert (refused.value.code, refused.value.field) == ("idempotency_conflict", "idempotency_key")
    assert str(made.instance.pk) not in str(refused.value)


def test_the_concurrency_key_is_rendered_from_the_payload(dispatched):
    wf = WorkflowFactory(concurrency=Concurrency(limit=1, key="{{ payload.name }}"))
    made = trigger_create(workflow=wf, idempotency_key="k1", payload=PAYLOAD).instance
    assert TriggerInstance.objects.get(pk=made.pk).concurrency_key == "Ada"
