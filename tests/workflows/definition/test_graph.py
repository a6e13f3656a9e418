"""The definition as a graph, checked at save: a cycle is refused naming it from the
first node along the edges, and every node no edge reaches from the entry is refused
(a conditional edge reaches its node); the API answers 400 naming the node."""

from __future__ import annotations

import pytest

from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.models import Workflow

URL = "/api/v1/workflows/"


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code, p.message) for p in info.value.errors]


def test_cycle_is_rejected():
    d = email_sms_definition()
    d["edges"].append({"from": "text", "to": "hello"})
    found = problems(d)
    assert found[0][1:3] == ("edges", "cycle")


def test_a_cycle_is_named_from_the_first_node_along_the_edges():
    d = email_sms_definition(delay="1h")  # hello -> wait -> text
    d["edges"].append({"from": "text", "to": "hello"})
    with pytest.raises(DefinitionError) as info:
        validate_definition(d)
    cycle = info.value.errors[0]
    assert (cycle.node, cycle.field, cycle.code) == ("hello", "edges", "cycle")
    assert cycle.message == "the graph has a cycle: hello -> wait -> text -> hello"
    assert info.value.message == (
        "definition.edges: node 'hello', edges: the graph has a cycle: "
        "hello -> wait -> text -> hello"
    )


def test_a_node_with_an_edge_to_itself_is_a_cycle():
    d = email_sms_definition(delay="1h")
    d["edges"].append({"from": "wait", "to": "wait"})
    with pytest.raises(DefinitionError) as info:
        validate_definition(d)
    assert info.value.errors[0].message == "the graph has a cycle: wait -> wait"


def test_unreachable_nodes_are_refused_naming_each():
    d = email_sms_definition()
    d["nodes"].append({"id": "orphan", "type": "delay", "config": {"duration": "1m"}})
    d["nodes"].append({"id": "after_orphan", "type": "sms", "config": d["nodes"][1]["config"]})
    d["edges"].append({"from": "orphan", "to": "after_orphan"})
    found = problems(d)
    assert [(p[0], p[1], p[2]) for p in found] == [
        ("orphan", "nodes[2]", "unreachable_node"),
        ("after_orphan", "nodes[3]", "unreachable_node"),
    ]
    assert "'hello'" in found[0][3]


def test_a_node_reached_only_through_a_conditional_edge_is_reachable():
    d = email_sms_definition(delay="1m")
    d["edges"] = [
        {"from": "hello", "to": "wait", "condition": "payload.slow"},
        {"from": "hello", "to": "text"},
        {"from": "wait", "to": "text"},
    ]
    validate_definition(d)


@pytest.mark.django_db
def test_api_refuses_an_unreachable_node_with_400(api):
    d = email_sms_definition()
    d["edges"] = []
    response = api.post(URL, {"key": "w", "name": "W", "definition": d}, format="json")
    assert response.status_code == 400
    error = response.json()
    assert (error["field"], error["code"]) == ("definition.nodes[1]", "unreachable_node")
    assert "'text'" in error["message"]
    assert not Workflow.objects.exists()
