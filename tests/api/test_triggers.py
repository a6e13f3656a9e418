from __future__ import annotations

import pytest

from tests.factories import PAYLOAD, TriggerInstanceFactory
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = pytest.mark.django_db


def post(api, **body):
    return api.post("/api/v1/triggers/", body, format="json")


def test_new_trigger_is_enqueued_at_the_entry_node(api, workflow):
    response = post(api, workflow=workflow.key, idempotency_key="k1", payload=PAYLOAD)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "enqueued"
    assert body["cursor"] == {"current_node_id": "hello"}
    assert body["attempts"] == 0 and body["vars"] == {} and body["payload"] == PAYLOAD
    assert body["workflow"] == workflow.key and body["workflow_version"] == 1
    assert set(body) == {
        "id",
        "workflow",
        "workflow_version",
        "idempotency_key",
        "status",
        "cursor",
        "vars",
        "attempts",
        "available_at",
        "payload",
        "last_error",
        "created_at",
        "updated_at",
        "finished_at",
        "recipient",
        "recipient_erased",
        "test",
    }
    assert body["test"] is False
    assert body["recipient"] is None and body["recipient_erased"] is False
    assert "Idempotent-Replayed" not in response


def test_duplicate_key_returns_existing_with_replay_header(api, workflow):
    first = post(api, workflow=workflow.key, idempotency_key="k1", payload=PAYLOAD)
    again = post(api, workflow=workflow.key, idempotency_key="k1", payload={"other": 1})
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["payload"] == PAYLOAD
    assert TriggerInstance.objects.count() == 1


def test_same_key_on_another_workflow_is_a_new_instance(api, workflow):
    from tests.factories import WorkflowFactory

    other = WorkflowFactory()
    assert post(api, workflow=workflow.key, idempotency_key="k", payload={}).status_code == 201
    assert post(api, workflow=other.key, idempotency_key="k", payload={}).status_code == 201


def test_instance_pins_the_version_it_started_on(api, workflow):
    from tests.factories import email_sms_definition
    from workflows.services import workflow_save

    first = post(api, workflow=workflow.key, idempotency_key="a", payload={}).json()
    workflow_save(key=workflow.key, name=workflow.name, definition=email_sms_definition(delay="5m"))
    second = post(api, workflow=workflow.key, idempotency_key="b", payload={}).json()
    assert (first["workflow_version"], second["workflow_version"]) == (1, 2)
    assert (
        TriggerInstance.objects.get(pk=first["id"]).workflow_version.definition["nodes"][1]["id"]
        == "text"
    )


def test_get_one_and_404(api, workflow):
    created = post(api, workflow=workflow.key, idempotency_key="k", payload={}).json()
    assert api.get(f"/api/v1/triggers/{created['id']}/").json()["id"] == created["id"]
    missing = api.get("/api/v1/triggers/00000000-0000-0000-0000-000000000000/")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def test_list_filters_and_pagination(api, workflow):
    from tests.factories import WorkflowFactory

    other = WorkflowFactory()
    TriggerInstanceFactory.create_batch(3, workflow=workflow)
    TriggerInstanceFactory(
        workflow=workflow, status=TriggerStatus.FAILED, idempotency_key="the-failed-one"
    )
    TriggerInstanceFactory(workflow=other)
    assert len(api.get("/api/v1/triggers/").json()["results"]) == 5
    by_wf = api.get("/api/v1/triggers/", {"workflow": workflow.key}).json()["results"]
    assert len(by_wf) == 4
    failed = api.get("/api/v1/triggers/", {"status": "failed"}).json()["results"]
    assert [r["idempotency_key"] for r in failed] == ["the-failed-one"]
    by_key = api.get("/api/v1/triggers/", {"idempotency_key": "the-failed-one"}).json()
    assert len(by_key["results"]) == 1
    page = api.get("/api/v1/triggers/?page_size=2").json()
    assert "next" in page
    bad = api.get("/api/v1/triggers/", {"status": "nope"})
    assert bad.status_code == 400 and bad.json()["field"] == "status"


def test_deactivating_a_workflow_takes_effect_at_once_in_this_process(api, workflow):
    from workflows.services import workflow_set_active

    assert post(api, workflow=workflow.key, idempotency_key="a", payload={}).status_code == 201
    workflow_set_active(workflow=workflow, is_active=False)
    refused = post(api, workflow=workflow.key, idempotency_key="b", payload={})
    assert refused.status_code == 400 and refused.json()["code"] == "inactive_workflow"
    # A replay of an existing key still answers with the instance.
    assert post(api, workflow=workflow.key, idempotency_key="a", payload={}).status_code == 200


def test_a_new_version_is_used_at_once_in_this_process(api, workflow):
    from tests.factories import email_sms_definition
    from workflows.services import workflow_save

    post(api, workflow=workflow.key, idempotency_key="a", payload={})
    workflow_save(key=workflow.key, name=workflow.name, definition=email_sms_definition(delay="1m"))
    second = post(api, workflow=workflow.key, idempotency_key="b", payload={}).json()
    assert second["workflow_version"] == 2


def test_a_replay_after_a_new_version_answers_the_instance_as_it_started(api, workflow):
    from tests.factories import email_sms_definition
    from workflows.services import workflow_save

    first = post(api, workflow=workflow.key, idempotency_key="a", payload=PAYLOAD).json()
    workflow_save(key=workflow.key, name=workflow.name, definition=email_sms_definition(delay="5m"))
    again = post(api, workflow=workflow.key, idempotency_key="a", payload={"other": 1})
    assert again.status_code == 200
    assert again.json() == first
