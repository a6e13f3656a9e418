"""The variables a definition's templates and conditions read, checked at save: each
place sees its own context (a node's templates, edge conditions, interests, cancel
rules), a misspelt variable is refused with a suggestion, ``vars`` only holds what
nodes write, and what a template makes itself is not a context variable."""

from __future__ import annotations

import json

import pytest

from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.models import Workflow

URL = "/api/v1/workflows/"


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code, p.message) for p in info.value.errors]


def test_a_misspelt_context_variable_is_refused_with_a_suggestion():
    d = email_sms_definition()
    d["nodes"][1]["config"]["body"] = "Hi {{ paylod.name }}"
    ((node, field, code, message),) = problems(d)
    assert (node, field, code) == ("text", "nodes[1].config.body", "unknown_variable")
    assert "'paylod'" in message and "'payload'" in message


def test_vars_no_node_writes_are_refused_naming_what_nodes_write():
    d = email_sms_definition(delay="1m")
    d["nodes"][2]["config"]["body"] = "Sent {{ vars.email_helo.message_id }}"
    d["edges"][1]["condition"] = "vars.delay_wait"  # a delay writes no vars
    found = problems(d)
    assert [(p[0], p[1], p[2]) for p in found] == [
        ("text", "nodes[2].config.body", "unknown_variable"),
        ("wait", "edges[1].condition", "unknown_variable"),
    ]
    assert "'email_hello'" in found[0][3] and "vars.email_hello" in found[0][3]


def test_each_place_sees_its_own_context():
    d = email_sms_definition()
    d["nodes"].append(
        {
            "id": "reply",
            "type": "wait",
            "config": {"event": "replied", "timeout": "1h", "match": "event.context.ok"},
        }
    )
    d["edges"].append({"from": "text", "to": "reply", "condition": "vars.sms_text.message_id"})
    d["interests"] = ["user:{{ payload.email }}:{{ trigger.id }}"]
    d["cancel_on"] = [{"event": "unsubscribed", "match": "event.context.email == payload.email"}]
    validate_definition(d)  # each variable is one its place sees

    for change, where in [
        (lambda x: x["interests"].append("{{ vars.email_hello.to }}"), "interests[1]"),
        (lambda x: x["cancel_on"].append({"event": "e", "match": "now"}), "cancel_on[1].match"),
        (
            lambda x: x["edges"].__setitem__(0, {**x["edges"][0], "condition": "event.name"}),
            "edges[0].condition",
        ),
    ]:
        broken = json.loads(json.dumps(d))
        change(broken)
        assert [(p[1], p[2]) for p in problems(broken)] == [(where, "unknown_variable")]


def test_variables_a_template_makes_itself_are_not_context_variables():
    d = email_sms_definition()
    d["nodes"][0]["config"]["body"] = (
        "{% assign first = payload.items | first %}{{ first }}"
        "{% for item in payload.items %}{{ forloop.index }}: {{ item.name }}{% endfor %}"
        "{% capture total %}{{ payload.total }}{% endcapture %}{{ total }} {{ now }}"
        "{{ vars[payload.key] }} {{ workflow.version }}"
    )
    validate_definition(d)


@pytest.mark.django_db
def test_api_refuses_a_misspelt_variable_with_400(api):
    d = email_sms_definition()
    d["nodes"][0]["config"]["subject"] = "Hi {{ payload.name }} from {{ workflw.name }}"
    response = api.post(URL, {"key": "w", "name": "W", "definition": d}, format="json")
    assert response.status_code == 400
    error = response.json()
    assert (error["field"], error["code"]) == (
        "definition.nodes[0].config.subject",
        "unknown_variable",
    )
    assert "'workflow'" in error["message"]
    assert not Workflow.objects.exists()
