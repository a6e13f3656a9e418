"""The schema every workflow.json points at is the definition's own JSON Schema wrapped in
the file's settings, takes ``field@`` for any config field, and passes what export
writes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.factories import WorkflowFactory, email_definition
from workflows.definition_schema import DEFINITION, definition_json_schema
from workflows.file_schema import workflow_file_schema, workflow_file_schema_text
from workflows.files import read_directory
from workflows.management.commands.workflows import Command


def test_the_schema_holds_the_definition_schema_of_the_api():
    schema = workflow_file_schema()
    definition = definition_json_schema()["$defs"]
    assert schema["$defs"][DEFINITION] == definition[DEFINITION]
    assert schema["properties"]["definition"] == {"$ref": f"#/$defs/{DEFINITION}"}
    # Every other component is the definition's, config fields aside (they take field@).
    assert set(schema["$defs"]) == set(definition)


@pytest.mark.django_db
def test_export_writes_the_schema_and_every_exported_file_validates_against_it(tmp_path):
    WorkflowFactory(key="welcome", definition=email_definition("Hello\n{{ payload.name }}"))
    WorkflowFactory(key="follow-up")
    Command().export(tmp_path, keys=[])
    schema = json.loads((tmp_path / "workflow.schema.json").read_text())
    assert (tmp_path / "workflow.schema.json").read_text() == workflow_file_schema_text()
    validator = jsonschema.Draft202012Validator(schema)
    for key in ("welcome", "follow-up"):
        document = json.loads((tmp_path / key / "workflow.json").read_text())
        assert (tmp_path / key / document["$schema"]).resolve() == (
            tmp_path / "workflow.schema.json"
        )
        validator.validate(document)
    config = json.loads((tmp_path / "welcome" / "workflow.json").read_text())["definition"]
    assert "body@" in config["nodes"][0]["config"]
    assert read_directory(tmp_path)[1] == []


def test_a_required_field_may_be_a_file_but_must_be_given_one_way():
    validator = jsonschema.Draft202012Validator(workflow_file_schema())
    document = {"key": "w", "name": "W", "definition": email_definition("Hi")}
    config = document["definition"]["nodes"][0]["config"]
    del config["body"]
    assert not validator.is_valid(document)
    config["body@"] = "mail.body.liquid"
    assert validator.is_valid(document)
    config["body"] = "Hi"
    assert not validator.is_valid(document)
    config.pop("body@")
    config["colour@"] = "x.liquid"
    assert not validator.is_valid(document)
