"""GET /api/v1/workflows/{key}/versions/ (newest first), …/{n}/, …/{n}/diff/?against=m and
POST …/{n}/restore/: a workflow's history, readable and restorable, within what the
API key may see."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from workflows.models import WorkflowVersion
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/{}/versions/"


def client_for(scope: str, workflows: list[str] | None = None) -> APIClient:
    raw = api_key_create(name=f"{scope}-key", scope=scope, workflows=workflows or ())[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def three_versions():
    """v1 plain, v2 with a one-hour wait, v3 with a five-minute wait."""
    workflow = WorkflowFactory(key="welcome")
    for delay, message in (("1h", "wait an hour"), ("5m", "shorter wait")):
        workflow = workflow_save(
            key="welcome",
            name=workflow.name,
            definition=email_sms_definition(delay=delay),
            actor="ann",
            message=message,
        )
    return workflow


def test_the_list_is_newest_first_with_message_author_and_which_is_current(api, three_versions):
    response = api.get(URL.format("welcome"))
    assert response.status_code == 200
    rows = response.json()["results"]
    assert [r["version"] for r in rows] == [3, 2, 1]
    assert [r["is_current"] for r in rows] == [True, False, False]
    assert (rows[0]["message"], rows[0]["created_by"]) == ("shorter wait", "ann")
    assert set(rows[0]) == {"version", "message", "created_by", "created_at", "is_current"}


def test_the_list_pages_by_cursor(api, three_versions):
    first = api.get(URL.format("welcome"), {"page_size": 2}).json()
    assert [r["version"] for r in first["results"]] == [3, 2]
    rest = api.get(first["next"]).json()
    assert [r["version"] for r in rest["results"]] == [1]


def test_one_version_comes_with_its_definition(api, three_versions):
    response = api.get(URL.format("welcome") + "2/")
    assert response.status_code == 200
    body = response.json()
    assert (body["version"], body["message"], body["is_current"]) == (2, "wait an hour", False)
    wait = next(node for node in body["definition"]["nodes"] if node["id"] == "wait")
    assert wait["config"]["duration"] == "1h"


def test_an_unknown_version_or_workflow_is_404(api, three_versions):
    missing = api.get(URL.format("welcome") + "9/")
    assert missing.status_code == 404
    assert (missing.json()["code"], missing.json()["field"]) == ("unknown_version", "version")
    assert api.get(URL.format("welcome") + "9/diff/").status_code == 404
    assert api.get(URL.format("nope")).status_code == 404
    assert api.get(URL.format("nope") + "1/").status_code == 404


def test_the_diff_defaults_to_the_version_before(api, three_versions):
    body = api.get(URL.format("welcome") + "3/diff/").json()
    assert (body["version"], body["against"]) == (3, 2)
    assert body["diff"].startswith("--- welcome v2\n+++ welcome v3\n")
    assert '-        "duration": "1h"' in body["diff"]
    assert '+        "duration": "5m"' in body["diff"]


def test_the_diff_against_a_chosen_version_and_against_itself(api, three_versions):
    body = api.get(URL.format("welcome") + "3/diff/", {"against": 1}).json()
    assert body["against"] == 1
    assert '+      "id": "wait",' in body["diff"]
    same = api.get(URL.format("welcome") + "2/diff/", {"against": 2}).json()
    assert same == {"version": 2, "against": 2, "diff": ""}


def test_the_first_version_diffs_against_nothing(api, three_versions):
    body = api.get(URL.format("welcome") + "1/diff/").json()
    assert body["against"] is None
    assert body["diff"].startswith("--- /dev/null\n+++ welcome v1\n")
    assert not any(line.startswith("-") for line in body["diff"].splitlines()[2:])


@pytest.mark.parametrize("against", ["two", "0", "1.0", ""])
def test_a_bad_against_is_400_naming_it(api, three_versions, against):
    response = api.get(URL.format("welcome") + "3/diff/", {"against": against})
    assert response.status_code == 400
    assert response.json()["field"] == "against"


def test_an_unknown_against_is_404_naming_it(api, three_versions):
    response = api.get(URL.format("welcome") + "3/diff/", {"against": 7})
    assert response.status_code == 404
    assert (response.json()["code"], response.json()["field"]) == ("unknown_version", "against")


def test_restoring_v1_after_v3_adds_v4_equal_to_v1_and_running_instances_keep_v3(
    api, three_versions
):
    running = TriggerInstanceFactory(workflow=three_versions)
    response = api.post(URL.format("welcome") + "1/restore/")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["version"], body["message"], body["is_current"]) == (4, "restored from v1", True)
    assert body["created_by"] == "api:tests"
    v1 = WorkflowVersion.objects.get(workflow=three_versions, version=1)
    assert body["definition"] == v1.definition
    assert api.get("/api/v1/workflows/welcome/").json()["version"] == 4
    running.refresh_from_db()
    assert running.workflow_version.version == 3
    assert api.get(f"/api/v1/triggers/{running.pk}/").json()["workflow_version"] == 3


def test_restoring_what_is_current_already_is_409(api, three_versions):
    response = api.post(URL.format("welcome") + "3/restore/")
    assert response.status_code == 409
    assert response.json()["code"] == "already_current"
    assert WorkflowVersion.objects.filter(workflow=three_versions).count() == 3


def test_restore_of_an_unknown_version_is_404_and_writes_nothing(api, three_versions):
    response = api.post(URL.format("welcome") + "8/restore/")
    assert response.status_code == 404 and response.json()["code"] == "unknown_version"
    assert WorkflowVersion.objects.filter(workflow=three_versions).count() == 3


def test_restore_takes_no_body(api, three_versions):
    response = api.post(URL.format("welcome") + "1/restore/", {"message": "x"}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "message"


def test_restore_needs_an_admin_key_and_reading_does_not(three_versions):
    reader = client_for("read")
    assert reader.get(URL.format("welcome")).status_code == 200
    refused = reader.post(URL.format("welcome") + "1/restore/")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"


def test_a_key_limited_to_other_workflows_sees_none_of_these_versions(three_versions):
    WorkflowFactory(key="other")
    limited = client_for("admin", workflows=["other"])
    assert limited.get(URL.format("other")).status_code == 200
    for path in ("", "1/", "2/diff/"):
        assert limited.get(URL.format("welcome") + path).status_code == 404
    assert limited.post(URL.format("welcome") + "1/restore/").status_code == 404
    assert WorkflowVersion.objects.filter(workflow=three_versions).count() == 3


def test_every_versions_operation_is_in_the_schema(client):
    schema = client.get("/api/schema/").content.decode()
    for path in ("", "{version}/", "{version}/diff/", "{version}/restore/"):
        assert f"/api/v1/workflows/{{key}}/versions/{path}:" in schema
