"""Hypothesis on definition validation (issue 12 item 8): whatever JSON arrives, the
validator returns a definition or raises DefinitionError - never anything else."""

from __future__ import annotations

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows.definition import DefinitionError, node_types, validate_definition
from workflows.definition_schema import definition_json_schema

DEFINITION_SCHEMA = jsonschema.Draft202012Validator(definition_json_schema())

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(
        [
            "{{ payload.x }}",
            "{% for i in (1..1000000000) %}{% endfor %}",
            "{{ x",
            "{% if %}",
            "9999999999d",
            "PT99999999999999999999S",
            "1h30m",
            "a, b@x",
            "\r\n",
            "09:00",
            "recipient",
            "Europe/Paris",
            "America",
        ]
    ),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
node_ids = st.sampled_from(["a", "b", "c", "", "bad id", 1, None])
config_keys = st.sampled_from(
    [
        "to",
        "subject",
        "body",
        "html_body",
        "from_email",
        "reply_to",
        "delay_ms",
        "duration",
        "until",
        "event",
        "timeout",
        "timeout_ms",
        "match",
        "subjects",
        "context",
        "event_id",
        "send_window",
        "expires_after",
        "other",
    ]
)
nodes = st.fixed_dictionaries(
    {
        "id": node_ids,
        "type": st.one_of(st.sampled_from(node_types.names()), json_values),
        "config": st.one_of(st.dictionaries(config_keys, json_values, max_size=6), json_values),
    },
    optional={"extra": json_values},
)
edges = st.fixed_dictionaries(
    {"from": node_ids, "to": node_ids}, optional={"condition": json_values}
)
definitions = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "entry_node_id": st.one_of(node_ids, json_values),
            "nodes": st.one_of(st.lists(nodes, max_size=5), json_values),
            "edges": st.one_of(st.lists(edges, max_size=6), json_values),
            "interests": st.one_of(st.lists(json_values, max_size=3), json_values),
            "cancel_on": st.one_of(st.lists(json_values, max_size=3), json_values),
            "unknown": json_values,
        },
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions)
def test_any_input_is_valid_or_a_definition_error(definition):
    try:
        clean = validate_definition(definition)
    except DefinitionError as exc:
        assert exc.errors and exc.code and exc.message
    else:
        assert validate_definition(clean) == clean
        # What is stored is what the OpenAPI schema says a definition is.
        DEFINITION_SCHEMA.validate(clean)


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1, max_value=60))
def test_deep_nesting_is_a_definition_error_not_a_crash(depth):
    value: object = "x"
    for _ in range(depth * 20):
        value = [value]
    definition = {
        "entry_node_id": "e",
        "nodes": [{"id": "e", "type": "emit", "config": {"event": "x", "context": {"v": value}}}],
        "edges": [],
    }
    try:
        validate_definition(definition)
    except DefinitionError:
        pass
