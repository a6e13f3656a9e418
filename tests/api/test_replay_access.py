"""An idempotent replay answers only to a key that may read the instance (issue 24 item
1): another `trigger` key gets 409 ``idempotency_conflict`` with nothing of the instance
in it - on POST triggers/, per item of triggers/bulk/, and per binding of an event."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from tests.factories import PAYLOAD, WorkflowFactory, WorkflowTriggerFactory, wait_definition
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

SECRET = {**PAYLOAD, "secret": "s3cr3t-of-key-a"}


def client(scope: str, name: str) -> APIClient:
    raw = api_key_create(name=name, scope=scope)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def post(api: APIClient, workflow, key: str = "k", payload: dict | None = None):
    body = {"workflow": workflow.key, "idempotency_key": key, "payload": payload or {}}
    return api.post("/api/v1/triggers/", body, format="json")


def assert_nothing_of(response, instance_id: str) -> None:
    text = response.content.decode()
    assert instance_id not in text
    assert "s3cr3t" not in text


def test_another_trigger_keys_replay_is_a_conflict_with_nothing_of_the_instance(workflow):
    owner, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    first = post(owner, workflow, payload=SECRET)
    assert first.status_code == 201
    instance_id = first.json()["id"]

    refused = post(other, workflow, payload={})

    assert refused.status_code == 409, refused.content
    assert refused.json()["code"] == "idempotency_conflict"
    assert refused.json()["field"] == "idempotency_key"
    assert "Idempotent-Replayed" not in refused
    assert_nothing_of(refused, instance_id)
    assert TriggerInstance.objects.count() == 1


def test_the_owner_and_keys_that_read_everything_still_get_the_replay(workflow):
    owner = client("trigger", "svc-a")
    instance_id = post(owner, workflow, payload=SECRET).json()["id"]
    for api in (owner, client("admin", "ops")):
        again = post(api, workflow, payload={"other": 1})
        assert again.status_code == 200, again.content
        assert again["Idempotent-Replayed"] == "true"
        assert again.json()["id"] == instance_id
        assert again.json()["payload"] == SECRET  # the first call's payload, as documented


def test_an_instance_made_in_the_console_is_not_replayed_to_a_trigger_key(workflow):
    from triggers.services import trigger_create

    made = trigger_create(workflow=workflow, idempotency_key="k", payload=SECRET).instance
    refused = post(client("trigger", "svc-a"), workflow)
    assert refused.status_code == 409 and refused.json()["code"] == "idempotency_conflict"
    assert_nothing_of(refused, str(made.pk))


def test_a_replay_of_an_inactive_workflows_instance_follows_the_same_rule(workflow):
    owner, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    instance_id = post(owner, workflow, payload=SECRET).json()["id"]
    workflow.is_active = False
    workflow.save()
    refused = post(other, workflow)
    assert refused.status_code == 409 and refused.json()["code"] == "idempotency_conflict"
    assert_nothing_of(refused, instance_id)
    assert post(owner, workflow).json()["id"] == instance_id


def test_bulk_items_replaying_another_keys_instance_are_refused_one_by_one(workflow):
    owner, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    instance_id = post(owner, workflow, "taken", SECRET).json()["id"]
    items = [
        {"workflow": workflow.key, "idempotency_key": "taken", "payload": {}},
        {"workflow": workflow.key, "idempotency_key": "fresh", "payload": {}},
        {"workflow": workflow.key, "idempotency_key": "fresh", "payload": {}},
    ]

    response = other.post("/api/v1/triggers/bulk/", {"items": items}, format="json")

    assert response.status_code == 200, response.content
    refused, created, repeated = response.json()["results"]
    assert refused["status"] == "invalid" and "id" not in refused
    assert refused["error"]["code"] == "idempotency_conflict"
    assert refused["error"]["field"] == "idempotency_key"
    assert created["status"] == "created"
    assert repeated == {"index": 2, "status": "duplicate", "id": created["id"]}
    assert_nothing_of(response, instance_id)
    # The owner replays its own.
    mine = owner.post("/api/v1/triggers/bulk/", {"items": items[:1]}, format="json")
    assert mine.json()["results"] == [{"index": 0, "status": "duplicate", "id": instance_id}]


def test_an_event_does_not_tell_another_key_the_instance_it_would_have_duplicated(workflow):
    WorkflowTriggerFactory(
        workflow=workflow,
        event_name="SIGNED_UP",
        idempotency_setting={"strategy": "CONTEXT_BASED", "contextFields": ["userId"]},
    )
    owner, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    event = {"name": "SIGNED_UP", "context": {"userId": "u1", "secret": "s3cr3t-of-key-a"}}
    created = owner.post("/api/v1/events/", event, format="json").json()["outcomes"][0]
    assert created["status"] == "created"
    instance_id = created["instance_id"]

    response = other.post("/api/v1/events/", {**event, "context": {"userId": "u1"}}, format="json")

    assert response.status_code == 202, response.content
    (outcome,) = response.json()["outcomes"]
    assert outcome["status"] == "skipped"
    assert outcome["code"] == "idempotency_conflict"
    assert outcome["instance_id"] is None
    assert_nothing_of(response, instance_id)
    again = owner.post("/api/v1/events/", event, format="json").json()["outcomes"][0]
    assert (again["status"], again["instance_id"]) == ("duplicate", instance_id)


def test_an_events_delivered_ids_are_only_those_the_key_may_read(dispatched):
    wf = WorkflowFactory(definition=wait_definition(interests=["order:{{ payload.order }}"]))
    owner, other = client("trigger", "svc-a"), client("trigger", "svc-b")
    theirs = post(owner, wf, "a", {**PAYLOAD, "order": 7}).json()["id"]
    mine = post(other, wf, "b", {**PAYLOAD, "order": 7}).json()["id"]
    body = {"name": "shipped", "event_id": "e1", "context": {}, "subjects": ["order:7"]}

    response = other.post("/api/v1/events/", body, format="json")

    assert response.status_code == 202, response.content
    assert response.json()["instances"] == [mine]
    assert theirs not in json.dumps(response.json())
    reader = client("admin", "ops").post(
        "/api/v1/events/", {**body, "event_id": "e2"}, format="json"
    )
    assert set(reader.json()["instances"]) == {theirs, mine}
