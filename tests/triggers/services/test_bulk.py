"""Creating many instances at once (``trigger_create_bulk``): one outcome per item, in
order, each with the single call's semantics - created, a duplicate of an existing key
or of an earlier item of the same request, or invalid with the error the single call
would raise - and nothing else affected by an invalid item. Runs on both databases (one
batched insert per database)."""

from __future__ import annotations

import pytest

from api_keys.models import ApiKeyScope
from api_keys.services import api_key_create
from notifyflow.errors import ApplicationError
from tests.factories import PAYLOAD, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import TriggerItem, trigger_create, trigger_create_bulk
from triggers.services.bulk import MAX_BULK_ITEMS

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def item(workflow: str, key: str, **payload: object) -> TriggerItem:
    return TriggerItem(workflow=workflow, idempotency_key=key, payload=payload or dict(PAYLOAD))


def test_each_item_is_created_enqueued_audited_and_dispatched_in_order(dispatched):
    wf = WorkflowFactory()
    outcomes = trigger_create_bulk(items=[item(wf.key, f"k{n}") for n in range(3)], actor="bo")
    assert [o.status for o in outcomes] == ["created"] * 3
    rows = {row.pk: row for row in TriggerInstance.objects.all()}
    assert [rows[o.instance_id].idempotency_key for o in outcomes] == ["k0", "k1", "k2"]
    assert {row.status for row in rows.values()} == {TriggerStatus.ENQUEUED}
    assert TriggerStatusChange.objects.filter(actor="bo", to_status="enqueued").count() == 3
    assert sorted(instance_id for instance_id, _ in dispatched) == sorted(
        str(o.instance_id) for o in outcomes
    )


def test_an_existing_key_and_a_repeat_within_the_request_are_duplicates(dispatched):
    wf = WorkflowFactory()
    first = trigger_create(workflow=wf, idempotency_key="old", payload=PAYLOAD).instance
    outcomes = trigger_create_bulk(
        items=[item(wf.key, "old"), item(wf.key, "new"), item(wf.key, "new", name="Bob")]
    )
    assert [o.status for o in outcomes] == ["duplicate", "created", "duplicate"]
    assert outcomes[0].instance_id == first.pk
    assert outcomes[2].instance_id == outcomes[1].instance_id
    assert TriggerInstance.objects.get(pk=outcomes[1].instance_id).payload == PAYLOAD
    assert TriggerInstance.objects.count() == 2


def test_an_invalid_item_is_answered_as_the_single_call_and_the_others_are_created(dispatched):
    wf = WorkflowFactory()
    inactive = WorkflowFactory(is_active=False)
    refused_at_the_edge = ApplicationError(field="payload", code="invalid", message="no")
    outcomes = trigger_create_bulk(
        items=[
            item("no-such-workflow", "a"),
            item(inactive.key, "b"),
            refused_at_the_edge,
            item(wf.key, "c"),
        ]
    )
    assert [o.status for o in outcomes] == ["invalid", "invalid", "invalid", "created"]
    assert [o.error.code for o in outcomes[:3]] == [
        "unknown_workflow",
        "inactive_workflow",
        "invalid",
    ]
    assert TriggerInstance.objects.get().idempotency_key == "c"


def test_a_replay_on_a_workflow_deactivated_since_is_still_a_duplicate(dispatched):
    wf = WorkflowFactory()
    first = trigger_create(workflow=wf, idempotency_key="k", payload=PAYLOAD).instance
    wf.is_active = False
    wf.save()
    [outcome] = trigger_create_bulk(items=[item(wf.key, "k")])
    assert (outcome.status, outcome.instance_id) == ("duplicate", first.pk)


def test_a_replay_of_an_instance_the_key_may_not_read_is_invalid_without_its_id(dispatched):
    wf = WorkflowFactory()
    owner, _ = api_key_create(name="owner", scope=ApiKeyScope.TRIGGER)
    other, _ = api_key_create(name="other", scope=ApiKeyScope.TRIGGER)
    trigger_create(workflow=wf, idempotency_key="k", payload=PAYLOAD, api_key=owner)
    [outcome] = trigger_create_bulk(items=[item(wf.key, "k")], api_key=other)
    assert outcome.status == "invalid" and outcome.instance_id is None
    assert outcome.error is not None and outcome.error.code == "idempotency_conflict"


def test_more_than_the_maximum_of_items_is_refused_whole(dispatched):
    wf = WorkflowFactory()
    with pytest.raises(ApplicationError) as refused:
        trigger_create_bulk(items=[item(wf.key, f"k{n}") for n in range(MAX_BULK_ITEMS + 1)])
    assert (refused.value.code, refused.value.field) == ("too_many_items", "items")
    assert not TriggerInstance.objects.exists() and not dispatched
