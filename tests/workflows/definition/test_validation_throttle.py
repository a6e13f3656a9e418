"""The ``throttle`` node's config: limit, window, key, scope, on_limit; each problem
names the node and the field."""

from __future__ import annotations

import pytest

from tests.factories import throttle_definition
from workflows.definition import DefinitionError, validate_definition
from workflows.definition_schema import definition_json_schema


def problems(definition) -> list[tuple]:
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    return [(p.node, p.field, p.code) for p in info.value.errors]


def test_a_throttle_with_every_field_is_valid_and_kept_as_given():
    definition = throttle_definition(
        limit=10_000, window="1d", scope="recipient", on_limit="defer", key="{{ payload.kind }}"
    )
    clean = validate_definition(definition)
    assert clean["nodes"][0]["config"] == {
        "limit": 10_000,
        "window": "1d",
        "scope": "recipient",
        "on_limit": "defer",
        "key": "{{ payload.kind }}",
    }
    assert validate_definition(throttle_definition(limit=1, window="PT30M"))


@pytest.mark.parametrize("limit", [0, 10_001, -1, 1.5, "2", True])
def test_limit_must_be_an_integer_from_1_to_10000(limit):
    assert problems(throttle_definition(limit=limit)) == [
        ("gate", "nodes[0].config.limit", "invalid_definition")
    ]


def test_limit_and_window_are_required():
    definition = throttle_definition()
    definition["nodes"][0]["config"] = {}
    assert problems(definition) == [
        ("gate", "nodes[0].config.limit", "required"),
        ("gate", "nodes[0].config.window", "required"),
    ]


def test_bad_window_scope_on_limit_and_key_are_named():
    definition = throttle_definition(
        window="soon", scope="team", on_limit="drop", key="{{ payload.x "
    )
    definition["nodes"][0]["config"]["burst"] = 3
    found = problems(definition)
    assert ("gate", "nodes[0].config.burst", "unknown_field") in found
    assert ("gate", "nodes[0].config.window", "invalid_definition") in found
    assert ("gate", "nodes[0].config.scope", "invalid_definition") in found
    assert ("gate", "nodes[0].config.on_limit", "invalid_definition") in found
    assert ("gate", "nodes[0].config.key", "invalid_template") in found


def test_a_condition_may_read_the_throttle_output():
    definition = throttle_definition()
    definition["edges"][0]["condition"] = "vars.throttle_gate.count < 2"
    validate_definition(definition)


def test_the_json_schema_describes_the_throttle_node():
    import jsonschema

    schema = jsonschema.Draft202012Validator(definition_json_schema())
    schema.validate(throttle_definition(scope="recipient", on_limit="defer"))
    assert not schema.is_valid(throttle_definition(limit=0))
    assert not schema.is_valid(throttle_definition(scope="team"))
