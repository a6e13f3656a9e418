"""Definition errors that could only fail at run time are refused when the definition is
saved (API 400 and admin form errors, each naming node and field): an unknown Liquid
filter, a tag that loads another template (a variable the context never has:
test_variables.py; a node no edge reaches: test_graph.py)."""

from __future__ import annotations

import json

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_superuser
from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.models import Workflow

URL = "/api/v1/workflows/"


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code, p.message) for p in info.value.errors]


def test_unknown_filter_is_refused_naming_node_field_and_a_close_filter():
    d = email_sms_definition()
    d["nodes"][1]["config"]["body"] = "Hi {{ payload.name | upcse }}"
    ((node, field, code, message),) = problems(d)
    assert (node, field, code) == ("text", "nodes[1].config.body", "invalid_template")
    assert "unknown filter 'upcse'" in message and "'upcase'" in message


@pytest.mark.parametrize(
    "where",
    [
        ("nodes", 0, "config", "to"),
        ("nodes", 0, "config", "subject"),
        ("nodes", 0, "config", "html_body"),
        ("interests", 0),
    ],
)
def test_unknown_filter_is_refused_in_every_template_field(where):
    d = email_sms_definition()
    d["nodes"][0]["config"]["html_body"] = "<p>hi</p>"
    d["interests"] = ["order:{{ payload.id }}"]
    target = d
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = "{{ payload.email | no_such_filter }}"
    found = problems(d)
    assert [(p[2], "no_such_filter" in p[3]) for p in found] == [("invalid_template", True)]


def test_known_filters_still_pass():
    d = email_sms_definition()
    d["nodes"][0]["config"]["subject"] = "{{ payload.name | default: 'you' | upcase }}"
    d["edges"][0]["condition"] = 'payload.plan == "pro"'
    validate_definition(d)


@pytest.mark.parametrize("tag", ["include", "render"])
def test_a_tag_that_loads_another_template_is_refused(tag):
    d = email_sms_definition()
    d["nodes"][0]["config"]["body"] = "{% " + tag + " 'footer' %}"
    ((node, field, code, message),) = problems(d)
    assert (node, field, code) == ("hello", "nodes[0].config.body", "invalid_template")
    assert tag in message


@pytest.mark.django_db
def test_api_refuses_an_unknown_filter_with_400_and_stores_nothing(api):
    d = email_sms_definition()
    d["nodes"][1]["config"]["body"] = "{{ payload.name | shout }}"
    response = api.post(URL, {"key": "w", "name": "W", "definition": d}, format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == "definition.nodes[1].config.body"
    assert error["code"] == "invalid_template"
    assert "'text'" in error["message"] and "unknown filter 'shout'" in error["message"]
    assert not Workflow.objects.exists()


def admin_add(client: Client, definition: dict):
    return client.post(
        reverse("admin:workflows_workflow_add"),
        {
            "key": "broken",
            "name": "Broken",
            "is_active": "on",
            "definition": json.dumps(definition),
            # The read-only version-history inline still posts its management form.
            "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0",
            "versions-MIN_NUM_FORMS": "0",
            "versions-MAX_NUM_FORMS": "0",
        },
    )


@pytest.mark.django_db
def test_admin_editor_shows_both_errors_on_the_definition_field():
    client = Client()
    client.login(request=HttpRequest(), username=make_superuser().username, password=PASSWORD)
    d = email_sms_definition()
    d["nodes"][0]["config"]["subject"] = "{{ payload.name | shout }}"
    d["nodes"].append({"id": "orphan", "type": "delay", "config": {"duration": "1m"}})
    response = admin_add(client, d)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["definition"]
    assert any(
        e.startswith("Node “hello”, field nodes[0].config.subject:") and "shout" in e
        for e in errors
    )
    assert not Workflow.objects.filter(key="broken").exists()
    # Fixing the filter shows the next problem: the node nothing leads to.
    d["nodes"][0]["config"]["subject"] = "{{ payload.name | upcase }}"
    response = admin_add(client, d)
    errors = response.context["adminform"].form.errors["definition"]
    assert any(e.startswith("Node “orphan”, field nodes[2]: unreachable") for e in errors)
    assert not Workflow.objects.filter(key="broken").exists()


def test_default_makes_a_missing_payload_field_optional_and_a_bare_one_still_fails():
    from workflows.templating import TemplateError, render

    source = "Hi {{ payload.name | default: 'there' }}"
    assert render(source, {"payload": {}}) == "Hi there"
    assert render(source, {"payload": {"name": "Ada"}}) == "Hi Ada"
    with pytest.raises(TemplateError, match="undefined"):
        render("Hi {{ payload.nmae }}", {"payload": {"name": "Ada"}})


@pytest.mark.parametrize("node_type", [{"a": 1}, ["email"], None, 5])
def test_a_node_type_that_is_not_a_string_is_a_problem_not_a_crash(node_type):
    d = email_sms_definition()
    d["nodes"][0]["type"] = node_type
    assert ("hello", "nodes[0].type", "invalid_node_type") in [p[:3] for p in problems(d)]


def test_a_cancel_rule_whose_match_is_null_is_refused_as_the_schema_says():
    definition = {**email_sms_definition(), "cancel_on": [{"event": "gone", "match": None}]}
    assert [p[1] for p in problems(definition)] == ["cancel_on[0].match"]
