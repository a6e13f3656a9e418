"""A workflow definition is checked whole at save: its nodes and edges (one entry, no
unknown node; cycles: test_graph.py), each node's config and templates; every problem
names the node and the field, and the input is left as it came."""

from __future__ import annotations

import copy

import pytest

from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, validate_definition


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


def test_valid_definition_is_normalized():
    clean = validate_definition(email_sms_definition(delay="1h30m"))
    assert clean["entry_node_id"] == "hello"
    assert [n["id"] for n in clean["nodes"]] == ["hello", "wait", "text"]


def test_duplicate_node_ids_name_the_node():
    d = email_sms_definition()
    d["nodes"][1]["id"] = "hello"
    assert ("hello", "nodes[1].id", "duplicate_node_id") in problems(d)


def test_missing_entry_node():
    d = email_sms_definition()
    d["entry_node_id"] = "nope"
    assert ("nope", "entry_node_id", "unknown_node") in problems(d)


def test_edge_to_unknown_node():
    d = email_sms_definition()
    d["edges"].append({"from": "text", "to": "ghost"})
    assert ("ghost", "edges[1].to", "unknown_node") in problems(d)


def test_template_syntax_error_names_node_and_field():
    d = email_sms_definition()
    d["nodes"][0]["config"]["subject"] = "Hi {{ payload.name "
    assert ("hello", "nodes[0].config.subject", "invalid_template") in problems(d)


def test_html_body_template_is_parsed():
    d = email_sms_definition()
    d["nodes"][0]["config"]["html_body"] = "{% if %}"
    assert ("hello", "nodes[0].config.html_body", "invalid_template") in problems(d)


def test_condition_must_parse():
    d = email_sms_definition()
    d["edges"][0]["condition"] = "payload.x =="
    assert ("hello", "edges[0].condition", "invalid_template") in problems(d)


@pytest.mark.parametrize(
    "config,field",
    [
        ({"to": "x", "subject": "s"}, "nodes[0].config.body"),
        ({"to": "x", "subject": "s", "body": "b", "cc": "y"}, "nodes[0].config.cc"),
        ({"to": "", "subject": "s", "body": "b"}, "nodes[0].config.to"),
        ({"to": 5, "subject": "s", "body": "b"}, "nodes[0].config.to"),
    ],
)
def test_email_config_errors(config, field):
    d = email_sms_definition()
    d["nodes"][0]["config"] = config
    assert any(p[0] == "hello" and p[1] == field for p in problems(d))


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"delay_ms": 5, "duration": "5s"},
        {"delay_ms": -1},
        {"delay_ms": True},
        {"duration": "5 minutes"},
        {"duration": "P"},
        {"until": "{% if %}"},
    ],
)
def test_delay_config_errors(config):
    d = email_sms_definition(delay="5s")
    d["nodes"][1]["config"] = config
    assert all(p[0] == "wait" for p in problems(d))


def test_unknown_node_type_and_bad_ids():
    d = email_sms_definition()
    d["nodes"][0]["type"] = "fax"
    d["nodes"][1]["id"] = "has space"
    found = problems(d)
    assert ("hello", "nodes[0].type", "invalid_node_type") in found
    assert any(p[1] == "nodes[1].id" for p in found)


def test_not_an_object():
    assert problems([1, 2]) == [(None, "definition", "invalid_definition")]


def test_validation_does_not_mutate_input():
    d = email_sms_definition()
    snapshot = copy.deepcopy(d)
    validate_definition(d)
    assert d == snapshot
