"""Console authoring: the editor's check as you type (problems named by node and field,
the diagram redrawn without a save), the preview for a chosen recipient, test sends."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.admin_helpers import make_operator, make_superuser
from tests.factories import RecipientFactory, WorkflowFactory, email_sms_definition
from triggers.models import TriggerInstance
from workflows.models import WorkflowVersion

pytestmark = pytest.mark.django_db


def check_url(workflow=None) -> str:
    if workflow is None:
        return reverse("admin:workflows_workflow_authoring_check_new")
    return reverse("admin:workflows_workflow_authoring_check", args=[workflow.pk])


def check(client, text: str, workflow=None):
    return client.post(
        check_url(workflow), json.dumps({"definition": text}), content_type="application/json"
    )


@pytest.fixture
def root(client):
    client.force_login(make_superuser())
    return client


def test_check_names_each_problem_by_node_and_field_and_saves_nothing(root):
    workflow = WorkflowFactory()
    broken = email_sms_definition()
    broken["nodes"][1]["config"]["body"] = "{{ payload.name "
    broken["edges"].append({"from": "text", "to": "ghost"})

    response = check(root, json.dumps(broken), workflow)

    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False and body["svg"] is None
    where = {(p["node"], p["field"]) for p in body["problems"]}
    assert where == {("text", "nodes[1].config.body"), ("ghost", "edges[1].to")}
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 1


def test_check_draws_a_valid_definition_being_edited(root):
    workflow = WorkflowFactory()
    edited = email_sms_definition(delay="1h")

    body = check(root, json.dumps(edited), workflow).json()

    assert body == {"ok": True, "problems": [], "svg": body["svg"]}
    assert "<svg" in body["svg"] and "wait" in body["svg"]
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 1


def test_check_reports_text_that_is_not_json_with_its_line_and_column(root):
    body = check(root, '{\n  "nodes": [,]\n}').json()
    (problem,) = body["problems"]
    assert problem["code"] == "invalid_json"
    assert "line 2, column 13" in problem["message"]


def test_check_refuses_a_body_without_definition_text_and_a_get(root):
    response = root.post(check_url(), json.dumps({"definition": 3}), "application/json")
    assert response.status_code == 400 and response.json()["field"] == "definition"
    assert root.get(check_url()).status_code == 405


def test_check_needs_permission_to_edit_workflows(client):
    client.force_login(make_operator())
    workflow = WorkflowFactory()
    assert check(client, "{}", workflow).status_code == 403


def test_change_page_loads_the_checker_and_links_test_send(root):
    workflow = WorkflowFactory()
    page = root.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content
    assert b"workflow_authoring.js" in page
    assert check_url(workflow).encode() in page
    assert reverse("admin:workflows_workflow_test_send", args=[workflow.pk]).encode() in page


def test_test_send_creates_a_test_instance_and_opens_it(root, dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada")
    url = reverse("admin:workflows_workflow_test_send", args=[workflow.pk])

    response = root.post(url, {"recipient_id": "ada", "payload": '{"name": "Ada"}'})

    instance = TriggerInstance.objects.get()
    assert instance.is_test and instance.recipient_id == "ada"
    assert instance.idempotency_key.startswith("test:")
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "admin:triggers_triggerinstance_change", args=[instance.pk]
    )
    assert b">TEST<" in root.get(response["Location"]).content
    listing = root.get(reverse("admin:triggers_triggerinstance_changelist")).content
    assert b">TEST<" in listing


def test_test_send_form_takes_a_locale(root, dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada", locale="en")
    url = reverse("admin:workflows_workflow_test_send", args=[workflow.pk])
    assert b'name="locale"' in root.get(url).content

    refused = root.post(url, {"recipient_id": "ada", "payload": "{}", "locale": "klingon"})
    assert refused.status_code == 200
    assert "not a locale" in str(refused.context["form"].errors["locale"])
    assert not TriggerInstance.objects.exists()

    response = root.post(url, {"recipient_id": "ada", "payload": "{}", "locale": "pt-BR"})
    assert response.status_code == 302
    assert TriggerInstance.objects.get().locale == "pt-BR"


def test_test_send_to_an_unknown_recipient_is_a_form_error(root):
    workflow = WorkflowFactory()
    url = reverse("admin:workflows_workflow_test_send", args=[workflow.pk])
    response = root.post(url, {"recipient_id": "nobody", "payload": "{}"})
    assert response.status_code == 200
    assert "no recipient" in str(response.context["form"].errors["recipient_id"])
    assert not TriggerInstance.objects.exists()


def test_preview_page_shows_what_each_node_would_do_for_the_recipient(root):
    workflow = WorkflowFactory()
    RecipientFactory(id="bo", preferences={"channels": {"sms": False}})
    url = reverse("admin:workflows_workflow_preview", args=[workflow.pk])

    page = root.post(
        url,
        {
            "payload": json.dumps({"name": "Bo", "email": "b@example.com", "phone": "+15550001"}),
            "recipient_id": "bo",
        },
    ).content.decode()

    assert "For recipient <strong>bo</strong>" in page
    assert "would send" in page
    assert "skipped: preference_opt_out (rule channels.sms)" in page


def test_preview_page_with_an_unknown_recipient_is_a_form_error(root):
    workflow = WorkflowFactory()
    url = reverse("admin:workflows_workflow_preview", args=[workflow.pk])
    response = root.post(url, {"payload": '{"name": "x"}', "recipient_id": "nobody"})
    assert "no recipient" in str(response.context["form"].errors["recipient_id"])
