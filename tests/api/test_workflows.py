from __future__ import annotations

import pytest

from tests.factories import email_sms_definition
from triggers.models import TriggerInstance
from workflows.models import Workflow, WorkflowVersion

pytestmark = pytest.mark.django_db
URL = "/api/v1/workflows/"


def body(**overrides):
    return {
        "key": "welcome",
        "name": "Welcome",
        "is_active": True,
        "definition": email_sms_definition(),
        **overrides,
    }


def test_create_get_and_list(api):
    created = api.post(URL, body(), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["version"] == 1
    assert api.get(f"{URL}welcome/").json()["definition"]["entry_node_id"] == "hello"
    assert [w["key"] for w in api.get(URL).json()["results"]] == ["welcome"]


def test_put_with_changed_definition_adds_a_version(api):
    api.post(URL, body(), format="json")
    same = api.put(f"{URL}welcome/", body(name="Renamed"), format="json")
    assert same.status_code == 200 and same.json()["version"] == 1
    assert Workflow.objects.get().name == "Renamed"
    changed = api.put(
        f"{URL}welcome/", body(definition=email_sms_definition(delay="1m")), format="json"
    )
    assert changed.json()["version"] == 2
    assert list(WorkflowVersion.objects.values_list("version", flat=True).order_by("version")) == [
        1,
        2,
    ]


def test_invalid_definition_names_node_and_field_and_stores_nothing(api):
    d = email_sms_definition()
    d["nodes"][1]["config"]["body"] = "{{ oops"
    response = api.post(URL, body(definition=d), format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == "definition.nodes[1].config.body"
    assert "'text'" in error["message"] and error["code"] == "invalid_template"
    assert not Workflow.objects.exists() and not WorkflowVersion.objects.exists()


def test_invalid_put_keeps_the_old_version(api):
    api.post(URL, body(), format="json")
    d = email_sms_definition()
    d["edges"].append({"from": "text", "to": "hello"})
    assert api.put(f"{URL}welcome/", body(definition=d), format="json").status_code == 400
    assert Workflow.objects.get().current_version.version == 1


def test_duplicate_key_and_key_mismatch(api):
    api.post(URL, body(), format="json")
    dup = api.post(URL, body(), format="json")
    assert dup.status_code == 409 and dup.json()["code"] == "duplicate_key"
    mismatch = api.put(f"{URL}welcome/", body(key="other"), format="json")
    assert mismatch.status_code == 400 and mismatch.json()["field"] == "key"


def test_bad_key_and_missing_fields(api):
    bad = api.post(URL, body(key="not a slug"), format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "key"
    missing = api.post(URL, {"key": "x"}, format="json")
    assert missing.status_code == 400
    assert {e["field"] for e in missing.json()["errors"]} >= {"name", "definition"}


def test_unknown_workflow_is_404(api):
    assert api.get(f"{URL}nope/").status_code == 404


def test_critical_and_categories_are_written_read_and_kept_when_left_out(api):
    created = api.post(URL, body(), format="json")
    assert (created.json()["critical"], created.json()["categories"]) == (False, [])
    saved = api.put(
        f"{URL}welcome/", body(critical=True, categories=["security", "account"]), format="json"
    )
    assert saved.status_code == 200, saved.content
    assert (saved.json()["critical"], saved.json()["categories"]) == (True, ["security", "account"])
    kept = api.put(f"{URL}welcome/", body(name="Renamed"), format="json")
    assert (kept.json()["critical"], kept.json()["categories"]) == (True, ["security", "account"])
    workflow = Workflow.objects.get()
    assert (workflow.critical, workflow.categories) == (True, ["security", "account"])
    assert workflow.current_version.version == 1  # settings are not a new version


@pytest.mark.parametrize(
    ("overrides", "field", "code"),
    [
        ({"categories": ["a", "a"]}, "categories", "duplicate"),
        ({"categories": ["not a slug"]}, "categories.0", "invalid"),
        ({"categories": "marketing"}, "categories", "not_a_list"),
        ({"critical": "yes"}, "critical", "invalid"),
        ({"priority": "urgent"}, "priority", "invalid_choice"),
        ({"priority": 1}, "priority", "invalid_choice"),
        ({"priority": None}, "priority", "null"),
    ],
)
def test_bad_workflow_settings_are_400_naming_the_field(api, overrides, field, code):
    response = api.post(URL, body(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == (field, code)
    assert not Workflow.objects.exists()


def test_the_schema_documents_critical_and_categories(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    request = schema["components"]["schemas"]["WorkflowInput"]["properties"]
    assert request["critical"]["type"] == "boolean"
    assert request["categories"]["uniqueItems"] is True
    response = schema["components"]["schemas"]["WorkflowOutput"]["properties"]
    assert {"critical", "categories"} <= response.keys()


def test_concurrency_is_written_read_kept_when_left_out_and_removed_by_null(api):
    created = api.post(URL, body(), format="json")
    assert created.json()["concurrency"] is None
    limited = {"limit": 3, "key": "{{ payload.tenant }}"}
    saved = api.put(f"{URL}welcome/", body(concurrency=limited), format="json")
    assert saved.status_code == 200, saved.content
    assert saved.json()["concurrency"] == limited
    assert api.get(f"{URL}welcome/").json()["concurrency"] == limited
    kept = api.put(f"{URL}welcome/", body(name="Renamed"), format="json")
    assert kept.json()["concurrency"] == limited
    whole = api.put(f"{URL}welcome/", body(concurrency={"limit": 1}), format="json")
    assert whole.json()["concurrency"] == {"limit": 1, "key": ""}
    removed = api.put(f"{URL}welcome/", body(concurrency=None), format="json")
    assert removed.json()["concurrency"] is None
    workflow = Workflow.objects.get()
    assert (workflow.concurrency_limit, workflow.concurrency_key) == (None, "")
    assert workflow.current_version.version == 1  # settings are not a new version


@pytest.mark.parametrize(
    ("concurrency", "field", "code"),
    [
        ({"limit": 0}, "concurrency.limit", "min_value"),
        ({"limit": 2**31}, "concurrency.limit", "max_value"),
        ({"limit": "2"}, "concurrency.limit", "invalid"),
        ({"key": "{{ payload.tenant }}"}, "concurrency.limit", "required"),
        ({"limit": 2, "key": "{{ payload.tenant "}, "concurrency.key", "invalid_template"),
        ({"limit": 2, "key": "{{ recipient.email }}"}, "concurrency.key", "invalid_template"),
        ({"limit": 2, "key": "x" * 501}, "concurrency.key", "too_long"),
        ({"limit": 2, "keys": "x"}, "concurrency.keys", "unknown_field"),
        (2, "concurrency", "invalid"),
    ],
)
def test_bad_concurrency_is_400_naming_the_field(api, concurrency, field, code):
    response = api.post(URL, body(concurrency=concurrency), format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == (field, code)
    assert not Workflow.objects.exists()


def test_the_schema_documents_concurrency(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    request = components["WorkflowInput"]["properties"]["concurrency"]
    assert "null" in str(request) or request.get("nullable") is True
    assert components["ConcurrencyInput"]["properties"]["limit"]["minimum"] == 1
    assert components["ConcurrencyInput"]["required"] == ["limit"]
    response = components["WorkflowOutput"]["properties"]["concurrency"]
    assert "ConcurrencyOutput" in str(response)


def test_priority_is_written_read_kept_when_left_out_and_sets_new_instances_lanes(api):
    created = api.post(URL, body(), format="json")
    assert created.json()["priority"] == "normal"
    saved = api.put(f"{URL}welcome/", body(priority="critical"), format="json")
    assert saved.status_code == 200, saved.content
    assert saved.json()["priority"] == "critical"
    kept = api.put(f"{URL}welcome/", body(name="Renamed"), format="json")
    assert kept.json()["priority"] == "critical"
    assert Workflow.objects.get().current_version.version == 1  # not a new version
    trigger = {"workflow": "welcome", "idempotency_key": "k", "payload": {"email": "a@b.c"}}
    made = api.post("/api/v1/triggers/", trigger, format="json")
    assert made.status_code == 201, made.content
    assert TriggerInstance.objects.get(pk=made.json()["id"]).lane == "critical"


def test_the_schema_documents_priority(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    request = schema["components"]["schemas"]["WorkflowInput"]["properties"]["priority"]
    (ref,) = [part["$ref"] for part in request.get("allOf", [request])]
    choices = schema["components"]["schemas"][ref.rpartition("/")[2]]["enum"]
    assert choices == ["critical", "high", "normal", "bulk"]
    response = schema["components"]["schemas"]["WorkflowOutput"]["properties"]
    assert "priority" in response
