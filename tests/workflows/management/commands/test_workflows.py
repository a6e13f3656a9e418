"""``manage.py workflows``: a directory of three workflows (one with a template file)
round-trips through export, diff and sync with the exit codes CI relies on (0 done, 1
invalid, 2 a dry run found changes); a broken file is named with node and field and
nothing is written; --prune deactivates what lost its folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_definition
from workflows.models import Workflow, WorkflowVersion

ROOT = Path(__file__).resolve().parents[4]
BODY = "Hello {{ payload.name }},\n\nwelcome aboard."


def run(*args: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``manage.py workflows *args``."""
    out, err = StringIO(), StringIO()
    try:
        call_command("workflows", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


@pytest.fixture
def exported(db, tmp_path) -> Path:
    """Three workflows, exported; welcome's body lives in welcome/mail.body.liquid."""
    WorkflowFactory(key="welcome", definition=email_definition(BODY))
    WorkflowFactory(key="reminder")
    WorkflowFactory(key="digest")
    code, out, _ = run("export", "--dir", str(tmp_path))
    assert code == 0 and "3 workflows exported" in out
    assert (tmp_path / "welcome" / "mail.body.liquid").read_text() == BODY + "\n"
    return tmp_path


def test_a_second_export_changes_no_byte(exported):
    before = snapshot(exported)
    code, out, _ = run("export", "--dir", str(exported))
    assert code == 0 and "(0 files written)" in out
    assert snapshot(exported) == before


def test_export_of_named_workflows_only_and_an_unknown_key_exits_1(db, tmp_path):
    WorkflowFactory(key="one")
    WorkflowFactory(key="two")
    assert run("export", "one", "--dir", str(tmp_path))[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "workflow.schema.json"]
    code, _, _ = run("export", "nope", "--dir", str(tmp_path))
    assert code == 1


def test_an_edited_template_round_trips_into_one_new_version(exported):
    instance = TriggerInstanceFactory(workflow=Workflow.objects.get(key="welcome"))
    (exported / "welcome" / "mail.body.liquid").write_text(BODY + " See you soon.\n")
    assert run("validate", "--dir", str(exported))[0] == 0

    code, out, _ = run("diff", "--dir", str(exported))
    changes = [
        line
        for line in out.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert code == 0
    assert "welcome: changed (v1)" in out and "reminder: unchanged (v1)" in out
    assert changes == [
        f'-          "body": {json.dumps(BODY)},',
        f'+          "body": {json.dumps(BODY + " See you soon.")},',
    ]

    code, out, _ = run("sync", "--dry-run", "--dir", str(exported))
    assert code == 2 and "dry run: nothing written" in out
    assert WorkflowVersion.objects.count() == 3

    code, out, _ = run("sync", "-m", "warmer welcome", "--dir", str(exported))
    assert code == 0 and "welcome: updated (v2)" in out
    assert WorkflowVersion.objects.count() == 4
    version = Workflow.objects.get(key="welcome").current_version
    assert (version.version, version.message, version.created_by) == (2, "warmer welcome", "sync")
    assert version.definition["nodes"][0]["config"]["body"] == BODY + " See you soon."
    instance.refresh_from_db()
    assert instance.workflow_version.version == 1

    code, out, _ = run("sync", "--dir", str(exported))
    assert code == 0 and "3 unchanged" in out
    assert run("sync", "--dry-run", "--dir", str(exported))[0] == 0
    assert WorkflowVersion.objects.count() == 4


def test_a_broken_file_fails_validate_and_sync_naming_file_node_and_field(exported):
    (exported / "welcome" / "mail.body.liquid").write_text("Hello {{ payload.name\n")
    reminder = json.loads((exported / "reminder" / "workflow.json").read_text())
    reminder["definition"]["nodes"][1]["config"]["body"] = "Hi {% if %}"
    reminder["definition"]["nodes"][0]["config"].pop("subject")
    (exported / "reminder" / "workflow.json").write_text(json.dumps(reminder))
    (exported / "digest" / "workflow.json").write_text(
        (exported / "digest" / "workflow.json").read_text().replace('"name"', '"nmae"')
    )
    for command in (("validate",), ("sync",), ("sync", "--dry-run"), ("diff",)):
        code, _, err = run(*command, "--dir", str(exported))
        assert code == 1
        lines = err.splitlines()
        assert "welcome/mail.body.liquid: node 'mail', definition.nodes[0].config.body:" in err
        assert any(
            line.startswith("reminder/workflow.json: node 'text', definition.nodes[1].config.body:")
            for line in lines
        )
        assert any(
            line.startswith(
                "reminder/workflow.json: node 'hello', definition.nodes[0].config.subject:"
            )
            for line in lines
        )
        assert "digest/workflow.json: nmae: unknown field" in err
    assert WorkflowVersion.objects.count() == 3


def test_prune_deactivates_the_workflow_whose_folder_was_removed(exported):
    for path in sorted((exported / "digest").iterdir()):
        path.unlink()
    (exported / "digest").rmdir()
    code, out, _ = run("sync", "--dir", str(exported))
    assert code == 0 and "digest: only_in_database" in out
    assert Workflow.objects.get(key="digest").is_active
    assert run("sync", "--prune", "--dry-run", "--dir", str(exported))[0] == 2
    code, out, _ = run("sync", "--prune", "--dir", str(exported))
    assert code == 0 and "digest: deactivated" in out
    assert not Workflow.objects.get(key="digest").is_active
    assert Workflow.objects.count() == 3


def test_the_directory_defaults_to_the_setting(exported, settings):
    settings.NOTIFYFLOW_WORKFLOWS_DIR = str(exported)
    code, out, _ = run("validate")
    assert code == 0 and out == f"3 workflows in {exported}: valid\n"


def test_the_exit_code_of_the_process_is_1_for_an_invalid_directory(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "workflow.json").write_text("{")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    command = [sys.executable, "manage.py", "workflows", "validate", "--dir", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "broken/workflow.json: not JSON" in done.stderr
