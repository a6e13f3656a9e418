"""POST /api/v1/workflows/sync/: the files' sync over HTTP, admin only. Every problem of
every workflow in one 400 with nothing written; otherwise one new version per changed
workflow with the message and the key's name, unchanged ones left alone, prune
deactivates."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from tests.factories import WorkflowFactory, email_sms_definition
from workflows.models import Workflow, WorkflowVersion

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/sync/"


def client(scope: str = "admin", workflows: tuple[str, ...] = ()) -> APIClient:
    raw = api_key_create(name=f"{scope}-deploy", scope=scope, workflows=workflows)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def document(key: str, body: str = "Hi {{ payload.name }}", **settings) -> dict:
    definition = email_sms_definition()
    definition["nodes"][1]["config"]["body"] = body
    return {"key": key, "name": key.title(), "definition": definition, **settings}


def test_sync_creates_updates_and_leaves_unchanged_ones_alone(api):
    WorkflowFactory(key="same", name="Same")
    WorkflowFactory(key="edited", name="Edited")
    body = {
        "workflows": [document("same"), document("edited", body="Bye"), document("new")],
        "message": "release 42",
    }
    response = api.post(URL, body, format="json")
    assert response.status_code == 200, response.json()
    results = {r["key"]: r for r in response.json()["results"]}
    assert {k: (r["status"], r.get("version")) for k, r in results.items()} == {
        "edited": ("updated", 2),
        "new": ("created", 1),
        "same": ("unchanged", 1),
    }
    assert '+          "body": "Bye",' in results["edited"]["diff"]
    assert "diff" not in results["same"]
    version = Workflow.objects.get(key="edited").current_version
    assert (version.message, version.created_by) == ("release 42", "api:tests")
    assert WorkflowVersion.objects.filter(workflow__key="same").count() == 1


def test_a_dry_run_answers_the_plan_and_writes_nothing(api):
    WorkflowFactory(key="edited", name="Edited")
    WorkflowFactory(key="gone")
    body = {"workflows": [document("edited", body="Bye")], "dry_run": True, "prune": True}
    response = api.post(URL, body, format="json")
    assert [(r["key"], r["status"]) for r in response.json()["results"]] == [
        ("edited", "updated"),
        ("gone", "deactivated"),
    ]
    assert WorkflowVersion.objects.count() == 2 and Workflow.objects.get(key="gone").is_active


def test_prune_deactivates_the_workflows_not_listed(api):
    WorkflowFactory(key="kept", name="Kept")
    WorkflowFactory(key="gone")
    response = api.post(URL, {"workflows": [document("kept")], "prune": True}, format="json")
    assert {r["key"]: r["status"] for r in response.json()["results"]} == {
        "gone": "deactivated",
        "kept": "unchanged",
    }
    assert not Workflow.objects.get(key="gone").is_active


def test_every_problem_of_every_workflow_is_listed_and_nothing_is_written(api):
    WorkflowFactory(key="edited", name="Edited")
    bad_template = document("edited", body="Hi {{ payload.name")
    by_file = document("other")
    by_file["definition"]["nodes"][0]["config"]["body@"] = "body.liquid"
    del by_file["definition"]["nodes"][0]["config"]["body"]
    body = {
        "workflows": [
            document("fine"),
            bad_template,
            {**document("third"), "priority": "urgent"},
            by_file,
            document("fine"),
        ]
    }
    response = api.post(URL, body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["field"], e["code"]) for e in errors] == [
        ("workflows[1].definition.nodes[1].config.body", "invalid_template"),
        ("workflows[2].priority", "invalid"),
        ("workflows[3].definition.nodes[0].config.body@", "invalid"),
        ("workflows[4].key", "duplicate_key"),
    ]
    assert errors[0]["message"].endswith("(node 'text')")
    assert response.json()["field"] == "workflows[1].definition.nodes[1].config.body"
    assert not Workflow.objects.filter(key="fine").exists()
    assert WorkflowVersion.objects.count() == 1


def test_the_envelope_is_strict(api):
    assert api.post(URL, {"workflows": {}}, format="json").json()["field"] == "workflows"
    response = api.post(URL, {"workflows": [], "prnue": True}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "unknown_field")
    response = api.post(URL, {"workflows": [], "dry_run": "yes"}, format="json")
    assert response.json()["field"] == "dry_run"


def test_only_an_admin_key_may_sync():
    response = client("read").post(URL, {"workflows": []}, format="json")
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_a_key_limited_to_workflows_syncs_and_prunes_only_those():
    WorkflowFactory(key="mine")
    WorkflowFactory(key="theirs")
    api = client(workflows=("mine", "also-mine"))
    response = api.post(URL, {"workflows": [document("theirs")]}, format="json")
    assert response.status_code == 403
    response = api.post(URL, {"workflows": [document("also-mine")], "prune": True}, format="json")
    assert {r["key"]: r["status"] for r in response.json()["results"]} == {
        "also-mine": "created",
        "mine": "deactivated",
    }
    assert Workflow.objects.get(key="theirs").is_active
