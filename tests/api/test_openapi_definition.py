"""The OpenAPI schema teaches how to write a workflow: ``definition`` is a real JSON Schema
(every node type's config, edges, interests, cancel_on) generated from the validator's
specs, with a complete example that the validator and the API accept; and no text of
the schema points at documents that are not shipped."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
from django.test import Client
from drf_spectacular.validation import validate_schema

from tests.executions.test_preview import BRANCHING
from tests.factories import email_sms_definition
from workflows.definition import DefinitionError, node_types, validate_definition
from workflows.definition_schema import definition_json_schema
from workflows.demo import DEMO_DEFINITION

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


def components(schema: dict) -> dict:
    return schema["components"]["schemas"]


def resolve(schema: dict, node: dict) -> dict:
    """Follow ``$ref`` (and drf-spectacular's one-element ``allOf`` wrapper)."""
    while True:
        if "allOf" in node and len(node["allOf"]) == 1:
            node = node["allOf"][0]
        elif "$ref" in node:
            node = components(schema)[node["$ref"].rsplit("/", 1)[1]]
        else:
            return node


def test_the_whole_document_is_valid_openapi(schema):
    validate_schema(schema)


def test_definition_is_described_in_requests_and_responses(schema):
    for name in ("WorkflowInput", "WorkflowOutput"):
        definition = resolve(schema, components(schema)[name]["properties"]["definition"])
        assert definition["required"] == ["entry_node_id", "nodes"]
        assert set(definition["properties"]) == {
            "entry_node_id",
            "nodes",
            "edges",
            "interests",
            "cancel_on",
        }
        edge = resolve(schema, definition["properties"]["edges"]["items"])
        assert set(edge["properties"]) == {"from", "to", "condition"}
        rule = resolve(schema, definition["properties"]["cancel_on"]["items"])
        assert set(rule["properties"]) == {"event", "match"}


def test_every_node_type_and_config_field_of_the_validator_is_described(schema):
    definition = components(schema)["WorkflowDefinition"]
    variants = definition["properties"]["nodes"]["items"]["oneOf"]
    described = {}
    for variant in variants:
        node = resolve(schema, variant)
        (node_type,) = resolve(schema, node["properties"]["type"])["enum"]
        described[node_type] = node["properties"]["config"]
    specs = {t.name: t.fields for t in node_types.all()}
    assert set(described) == set(specs)
    for node_type, spec in specs.items():
        config = described[node_type]
        assert set(config["properties"]) == set(spec), node_type
        assert set(config.get("required", [])) == {k for k, f in spec.items() if f.required}
        assert config["additionalProperties"] is False
        for key in spec:
            field = resolve(schema, config["properties"][key])
            assert field.get("description"), (node_type, key)


def test_the_example_is_a_complete_workflow_the_api_accepts(schema, api):
    example = components(schema)["WorkflowDefinition"]["example"]
    used = {node["type"] for node in example["nodes"]}
    assert {"email", "sms", "delay", "wait", "emit"} <= used
    assert example["edges"] and example["interests"] and example["cancel_on"]
    assert any("condition" in edge for edge in example["edges"])
    validate_definition(example)

    body = schema["paths"]["/api/v1/workflows/"]["post"]["requestBody"]["content"]
    (request_example,) = body["application/json"]["examples"].values()
    assert request_example["value"]["definition"] == example
    created = api.post("/api/v1/workflows/", request_example["value"], format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["definition"] == validate_definition(example)


def test_no_request_or_response_example_shows_definition_as_a_string(schema):
    text = json.dumps(schema)
    assert '"definition": "string"' not in text
    for name in ("WorkflowInput", "WorkflowOutput"):
        assert resolve(schema, components(schema)[name]["properties"]["definition"])["type"] == (
            "object"
        )


def test_no_user_facing_text_cites_a_document_outside_the_repository(schema):
    text = json.dumps(schema, ensure_ascii=False)
    assert "SPEC" not in text and "§" not in text
    assert not re.search(r"\bseeds?\b", text, re.IGNORECASE)


# --- the generated JSON Schema agrees with the validator -------------------------------


def valid_definitions() -> list[dict]:
    return [
        email_sms_definition(),
        email_sms_definition(delay="1h30m"),
        DEMO_DEFINITION,
        definition_json_schema()["$defs"]["WorkflowDefinition"]["example"],
    ]


@pytest.mark.parametrize("definition", valid_definitions())
def test_what_the_validator_accepts_the_json_schema_accepts(definition):
    validate_definition(definition)
    jsonschema.Draft202012Validator(definition_json_schema()).validate(definition)


def test_a_definition_with_every_node_type_passes_both(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    validate_definition(BRANCHING)
    jsonschema.Draft202012Validator(definition_json_schema()).validate(BRANCHING)
    assert {n["type"] for n in BRANCHING["nodes"]} == set(node_types.names())


def _broken(change) -> dict:
    definition = copy.deepcopy(email_sms_definition(delay="5m"))
    change(definition)
    return definition


INVALID = {
    "unknown config field": lambda d: d["nodes"][0]["config"].update(cc="x"),
    "missing required field": lambda d: d["nodes"][2]["config"].pop("body"),
    "two delay modes": lambda d: d["nodes"][1]["config"].update(delay_ms=5),
    "no delay mode": lambda d: d["nodes"][1].update(config={}),
    "unknown node type": lambda d: d["nodes"][0].update(type="fax"),
    "bad node id": lambda d: d["nodes"][0].update(id="has space"),
    "unknown edge field": lambda d: d["edges"][0].update(weight=1),
    "bad duration": lambda d: d["nodes"][1]["config"].update(duration="5 minutes"),
    "unknown top-level field": lambda d: d.update(version=2),
    "no nodes": lambda d: d.update(nodes=[]),
    "a wait with two timeouts": lambda d: d["nodes"].__setitem__(
        1,
        {"id": "wait", "type": "wait", "config": {"event": "e", "timeout": "1h", "timeout_ms": 5}},
    ),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_what_the_json_schema_refuses_the_validator_refuses(name):
    definition = _broken(INVALID[name])
    assert not jsonschema.Draft202012Validator(definition_json_schema()).is_valid(definition)
    with pytest.raises(DefinitionError):
        validate_definition(definition)


def test_a_null_config_field_is_stored_as_absent_so_the_stored_definition_matches_the_schema():
    definition = email_sms_definition(delay="5m")
    definition["nodes"][1]["config"] = {"delay_ms": None, "duration": "5m", "until": None}
    definition["nodes"][0]["config"].update(html_body=None, retry={"max_retries": None})
    clean = validate_definition(definition)
    assert clean["nodes"][1]["config"] == {"duration": "5m"}
    assert clean["nodes"][0]["config"]["retry"] == {}
    assert "html_body" not in clean["nodes"][0]["config"]
    jsonschema.Draft202012Validator(definition_json_schema()).validate(clean)
