"""The node-type registry: built-in types registered in their order, one type per name,
fields the validator can check; a registered type validated by its declaration and
described by the JSON Schema, and gone once unregistered. The end-to-end proof with a
test-only type: tests/executions/test_node_registry.py."""

from __future__ import annotations

import pytest

from executions.step import NodeResult
from workflows.definition import (
    DefinitionError,
    ExactlyOneOf,
    FieldSpec,
    NodeType,
    node_types,
    validate_definition,
)
from workflows.definition_schema import definition_json_schema


def noop(step):
    return NodeResult()


def test_the_built_in_types_register_in_their_order_when_the_app_is_ready():
    assert node_types.names() == (
        "email",
        "sms",
        "delay",
        "wait",
        "emit",
        "webhook",
        "throttle",
        "batch",
        "in_app",
        "push",
        "chat",
    )
    assert node_types.get("email").channel == "email"
    assert node_types.get("delay").channel is None and not node_types.get("delay").writes_vars


def test_a_type_registers_once_by_name_with_fields_the_validator_can_check():
    declared = NodeType(name="hum", description="", fields={}, run=noop)
    try:
        assert node_types.register(declared) is declared
        assert node_types.register(declared) is declared  # again: a no-op
        assert node_types.get("hum") is declared and node_types.names()[-1] == "hum"
        with pytest.raises(ValueError, match="already registered"):
            node_types.register(NodeType(name="hum", description="", fields={}, run=noop))
    finally:
        node_types.unregister("hum")
    assert node_types.find("hum") is None
    with pytest.raises(KeyError):
        node_types.get("hum")
    with pytest.raises(ValueError, match="name"):
        node_types.register(NodeType(name="Hum!", description="", fields={}, run=noop))
    with pytest.raises(ValueError, match="kind"):
        odd = {"x": FieldSpec(True, "no_such_kind")}
        node_types.register(NodeType(name="odd", description="", fields=odd, run=noop))
    assert node_types.find("odd") is None


def test_a_registered_type_is_validated_by_its_declaration_and_in_the_json_schema():
    one_of = ExactlyOneOf(("a", "b"), code="invalid_pair", at="a")
    fields = {"a": FieldSpec(False, "int"), "b": FieldSpec(False, "choice", choices=("x", "y"))}
    node_types.register(
        NodeType(name="pair", description="A pair.", fields=fields, run=noop, exactly_one_of=one_of)
    )
    try:
        definition = {
            "entry_node_id": "p",
            "nodes": [{"id": "p", "type": "pair", "config": {"b": "z", "c": 1}}],
        }
        with pytest.raises(DefinitionError) as caught:
            validate_definition(definition)
        problems = {(p.field, p.code) for p in caught.value.errors}
        assert problems == {
            ("nodes[0].config.b", "invalid_definition"),
            ("nodes[0].config.c", "unknown_field"),
        }
        definition["nodes"][0]["config"] = {}
        with pytest.raises(DefinitionError) as caught:
            validate_definition(definition)
        [problem] = caught.value.errors
        assert (problem.field, problem.code) == ("nodes[0].config.a", "invalid_pair")
        assert "a pair needs exactly one of a, b" in problem.message
        definition["nodes"][0]["config"] = {"b": "y"}
        assert validate_definition(definition)["nodes"][0]["type"] == "pair"
        pair = definition_json_schema()["$defs"]["PairNode"]
        assert pair["description"] == "A pair."
        assert pair["properties"]["config"]["properties"]["b"]["enum"] == ["x", "y"]
        assert pair["properties"]["config"]["oneOf"] == [{"required": ["a"]}, {"required": ["b"]}]
    finally:
        node_types.unregister("pair")
    assert "PairNode" not in definition_json_schema()["$defs"]
    with pytest.raises(DefinitionError) as caught:
        validate_definition(definition)
    assert caught.value.errors[0].code == "invalid_node_type"
