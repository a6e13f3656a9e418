"""Workflows as files: a directory reads into validated specs or into every problem, each
naming file, node and field; ``field@`` references stay inside the workflow's folder; and
what export writes reads back as the same spec, byte-stable."""

from __future__ import annotations

import json
from pathlib import Path

from tests.factories import email_definition, email_sms_definition
from workflows.concurrency import Concurrency
from workflows.files import (
    WorkflowSpec,
    read_directory,
    spec_from_document,
    workflow_files,
    write_files,
)

LONG_BODY = "Hello {{ payload.name }},\n\nthanks for signing up.\n"


def write_workflow(directory: Path, key: str, document: dict, **files: str) -> Path:
    folder = directory / key
    folder.mkdir(parents=True)
    (folder / "workflow.json").write_text(json.dumps({"key": key, "name": key, **document}))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def referencing(field: str, file: str) -> dict:
    """email_definition whose ``field`` is read from ``file``."""
    definition = email_definition("inline")
    config = definition["nodes"][0]["config"]
    del config[field]
    config[f"{field}@"] = file
    return definition


def test_a_field_reference_reads_the_file_without_its_one_trailing_newline(tmp_path):
    write_workflow(
        tmp_path,
        "welcome",
        {"definition": referencing("body", "body.liquid")},
        **{"body.liquid": "Hi {{ payload.name }}\n\n"},
    )
    specs, problems = read_directory(tmp_path)
    assert problems == []
    assert specs[0].definition["nodes"][0]["config"]["body"] == "Hi {{ payload.name }}\n"


def test_settings_left_out_take_their_defaults(tmp_path):
    write_workflow(tmp_path, "welcome", {"definition": email_sms_definition()})
    [spec], _ = read_directory(tmp_path)
    assert (spec.is_active, spec.critical, spec.categories, spec.priority) == (
        True,
        False,
        (),
        "normal",
    )
    assert spec.concurrency.limit is None


def test_references_outside_the_folder_are_refused_naming_file_node_and_field(tmp_path):
    (tmp_path / "secret.txt").write_text("not a template of this workflow")
    definition = referencing("body", "../secret.txt")
    definition["nodes"][0]["config"]["subject@"] = "/etc/hostname"
    del definition["nodes"][0]["config"]["subject"]
    write_workflow(tmp_path, "welcome", {"definition": definition})
    specs, problems = read_directory(tmp_path)
    assert specs == []
    assert {(p.file, p.node, p.field, p.code) for p in problems} == {
        (
            "welcome/workflow.json",
            "mail",
            "definition.nodes[0].config.body@",
            "path_outside_folder",
        ),
        (
            "welcome/workflow.json",
            "mail",
            "definition.nodes[0].config.subject@",
            "path_outside_folder",
        ),
    }


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside.liquid").write_text("Hi")
    folder = write_workflow(tmp_path, "welcome", {"definition": referencing("body", "b.liquid")})
    (folder / "b.liquid").symlink_to(tmp_path / "outside.liquid")
    _, problems = read_directory(tmp_path)
    assert [p.code for p in problems] == ["path_outside_folder"]


def test_every_problem_of_every_workflow_is_listed_with_its_file_node_and_field(tmp_path):
    write_workflow(
        tmp_path,
        "broken-template",
        {"definition": referencing("body", "body.liquid"), "colour": "blue"},
        **{"body.liquid": "Hi {{ payload.name\n"},
    )
    write_workflow(tmp_path, "missing-file", {"definition": referencing("body", "gone.liquid")})
    (tmp_path / "not-json").mkdir()
    (tmp_path / "not-json" / "workflow.json").write_text("{")
    (tmp_path / "no-file").mkdir()
    write_workflow(tmp_path, "renamed", {"definition": email_sms_definition(), "priority": "x"})
    (tmp_path / "renamed" / "workflow.json").write_text(
        json.dumps({"key": "old-name", "name": "R", "definition": email_sms_definition()})
    )
    specs, problems = read_directory(tmp_path)
    found = {(p.file, p.node, p.field, p.code) for p in problems}
    assert specs == []
    assert found == {
        ("broken-template/workflow.json", None, "colour", "unknown_field"),
        (
            "broken-template/body.liquid",
            "mail",
            "definition.nodes[0].config.body",
            "invalid_template",
        ),
        ("missing-file/workflow.json", "mail", "definition.nodes[0].config.body@", "missing_file"),
        ("not-json/workflow.json", None, "", "invalid_json"),
        ("no-file/workflow.json", None, "", "missing_file"),
        ("renamed/workflow.json", None, "key", "key_mismatch"),
    }
    # A file that could not be read is one problem, not also "body is required".
    assert "is required" not in " ".join(str(p) for p in problems)
    assert str(next(p for p in problems if p.code == "invalid_template")).startswith(
        "broken-template/body.liquid: node 'mail', definition.nodes[0].config.body: "
    )


def test_invalid_settings_are_each_named():
    document = {
        "key": "Not a slug",
        "name": "",
        "critical": "yes",
        "categories": ["a", "a"],
        "priority": "urgent",
        "concurrency": {"limit": 0},
        "definition": email_sms_definition(),
    }
    spec, problems = spec_from_document(document, file="workflows[0]")
    assert spec is None
    assert [p.field for p in problems] == [
        "key",
        "name",
        "critical",
        "categories",
        "priority",
        "concurrency",
    ]


def test_a_document_without_a_folder_refuses_file_references():
    document = {"key": "w", "name": "W", "definition": referencing("body", "body.liquid")}
    spec, problems = spec_from_document(document, file="workflows[0]")
    assert spec is None
    assert [(p.file, p.field) for p in problems] == [
        ("workflows[0]", "definition.nodes[0].config.body@")
    ]


def exported_spec() -> WorkflowSpec:
    definition = email_definition(LONG_BODY)
    definition["nodes"][0]["config"]["html_body"] = "<p>Hello</p>\n<p>{{ payload.name }}</p>"
    definition["nodes"][0]["config"]["subject"] = "x" * 101
    return WorkflowSpec(
        key="welcome",
        name="Welcome",
        definition=definition,
        critical=True,
        categories=("account",),
        priority="high",
        concurrency=Concurrency(limit=3, key="{{ payload.team }}"),
    )


def test_export_moves_long_and_multi_line_strings_to_files_and_reads_back_the_same(tmp_path):
    spec = exported_spec()
    files = workflow_files(spec)
    assert sorted(files) == [
        "mail.body.liquid",
        "mail.html_body.html",
        "mail.subject.liquid",
        "workflow.json",
    ]
    config = json.loads(files["workflow.json"])["definition"]["nodes"][0]["config"]
    assert config == {
        "body@": "mail.body.liquid",
        "html_body@": "mail.html_body.html",
        "subject@": "mail.subject.liquid",
        "to": "{{ payload.email }}",
    }
    write_files(tmp_path / "welcome", files)
    [read], problems = read_directory(tmp_path)
    assert problems == [] and read == spec


def test_a_second_export_changes_no_byte_and_writes_no_file(tmp_path):
    spec = exported_spec()
    assert write_files(tmp_path / "welcome", workflow_files(spec))
    before = {p.name: p.read_bytes() for p in (tmp_path / "welcome").iterdir()}
    # The same definition with its keys in another order (as another database keeps them).
    shuffled = {key: spec.definition[key] for key in reversed(list(spec.definition))}
    again = WorkflowSpec(**{**spec.__dict__, "definition": shuffled})
    assert write_files(tmp_path / "welcome", workflow_files(again)) == []
    assert {p.name: p.read_bytes() for p in (tmp_path / "welcome").iterdir()} == before


def test_export_writes_only_the_settings_that_are_not_defaults():
    spec = WorkflowSpec(key="w", name="W", definition=email_sms_definition())
    document = json.loads(workflow_files(spec)["workflow.json"])
    assert list(document) == ["$schema", "key", "name", "definition"]
    assert document["$schema"] == "../workflow.schema.json"


def test_the_example_of_the_docs_reads_with_its_template_files(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "workflows-as-code.md").read_text()
    example = json.loads(doc.split("```json\n", 1)[1].split("```", 1)[0])
    folder = tmp_path / example["key"]
    folder.mkdir()
    (folder / "workflow.json").write_text(json.dumps(example))
    (folder / "mail.body.liquid").write_text("Hello {{ payload.name }}\n")
    (folder / "mail.html_body.html").write_text("<p>Hello {{ payload.name }}</p>\n")
    [spec], problems = read_directory(tmp_path)
    assert problems == []
    assert spec.categories == ("account",)
    assert spec.definition["nodes"][0]["config"]["body"] == "Hello {{ payload.name }}"
