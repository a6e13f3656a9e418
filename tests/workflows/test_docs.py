"""docs/workflows.md cannot drift from the product: every JSON block in it is sent through
the real API (workflows saved through the definition validator, their triggers previewed
without a render error and created, events accepted), and every node type and config
field the validator knows is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from translations.services import catalogue_put
from workflows.definition import node_types, validate_definition
from workflows.definition_schema import definition_json_schema

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "workflows.md"


def json_blocks() -> list[dict]:
    text = DOC.read_text()
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL)]


def kind(block: dict) -> str:
    if {"locale", "namespace", "messages"} == set(block):
        return "catalogue"
    if {"key", "name", "definition"} <= set(block):
        return "workflow"
    if {"workflow", "idempotency_key", "payload"} <= set(block):
        return "trigger"
    if {"name", "context"} <= set(block):
        return "event"
    raise AssertionError(f"a JSON block of docs/workflows.md that no test checks: {block}")


@pytest.fixture
def blocks(settings) -> dict[str, list[dict]]:
    # The webhook example's host, as the doc tells the reader to allow it.
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    found: dict[str, list[dict]] = {"workflow": [], "trigger": [], "event": [], "catalogue": []}
    for block in json_blocks():
        found[kind(block)].append(block)
    # The translated example's catalogues come before its workflow (saving checks its keys).
    for catalogue in found["catalogue"]:
        catalogue_put(**catalogue)
    return found


def test_the_three_examples_are_valid_and_saved_by_the_api(api, blocks):
    workflows = blocks["workflow"]
    assert len(workflows) >= 3
    schema = jsonschema.Draft202012Validator(definition_json_schema())
    used_types = set()
    for body in workflows:
        validate_definition(body["definition"])
        schema.validate(body["definition"])
        response = api.post("/api/v1/workflows/", body, format="json")
        assert response.status_code == 201, (body["key"], response.json())
        used_types |= {node["type"] for node in body["definition"]["nodes"]}
    # Between them the examples show every node type.
    assert used_types == set(node_types.names())


def test_each_example_has_a_trigger_that_previews_cleanly_and_runs(api, blocks):
    for body in blocks["workflow"]:
        api.post("/api/v1/workflows/", body, format="json")
    triggers = blocks["trigger"]
    assert {t["workflow"] for t in triggers} == {w["key"] for w in blocks["workflow"]}
    for trigger in triggers:
        preview = api.post(
            f"/api/v1/workflows/{trigger['workflow']}/preview/",
            {"payload": trigger["payload"]},
            format="json",
        ).json()
        assert [n["error"] for n in preview["nodes"]] == [None] * len(preview["nodes"]), preview
        assert len(preview["path"]) > 1
        created = api.post("/api/v1/triggers/", trigger, format="json")
        assert created.status_code == 201, created.json()
    for event in blocks["event"]:
        answer = api.post("/api/v1/events/", event, format="json")
        assert answer.status_code == 202, answer.json()
        # The example's event reaches the instance its example trigger started.
        assert answer.json()["delivered"] == 1


def test_every_node_type_and_config_field_is_documented():
    text = DOC.read_text()
    for node_type, spec in ((t.name, t.fields) for t in node_types.all()):
        section = re.search(rf"### `{node_type}`\n(.*?)(?=\n### |\n## )", text, re.DOTALL)
        assert section, f"no section for the {node_type} node"
        for field in spec:
            assert f"`{field}`" in section.group(1), (node_type, field)


def test_the_readme_links_the_guide_and_no_file_outside_the_repository():
    assert "(docs/workflows.md)" in (ROOT / "README.md").read_text()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        assert "../shared" not in text and "SPEC" not in text and "§" not in text, path.name
        assert not re.search(r"\bseeds?\b", text, re.IGNORECASE), path.name
