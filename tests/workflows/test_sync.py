"""Syncing specs into the database: one version per changed definition, with the message;
nothing for unchanged workflows; settings compared too; prune deactivates, never deletes;
a dry run writes nothing; running instances keep their version."""

from __future__ import annotations

import pytest

from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from workflows.concurrency import Concurrency
from workflows.files import WorkflowSpec
from workflows.models import Workflow, WorkflowVersion
from workflows.sync import SyncStatus, sync_plan, workflow_spec, workflows_sync

pytestmark = pytest.mark.django_db


def spec_of(key: str, **changes) -> WorkflowSpec:
    spec = workflow_spec(Workflow.objects.get(key=key))
    assert spec is not None
    return WorkflowSpec(**{**spec.__dict__, **changes})


def edited(body: str) -> dict:
    definition = email_sms_definition()
    definition["nodes"][1]["config"]["body"] = body
    return definition


def statuses(results) -> dict[str, str]:
    return {result.key: result.status.value for result in results}


def test_a_changed_definition_gets_one_new_version_with_the_message_and_actor():
    WorkflowFactory(key="a")
    WorkflowFactory(key="b")
    specs = [spec_of("a", definition=edited("Bye")), spec_of("b")]
    results = workflows_sync(specs=specs, message="shorter text", actor="sync")
    assert statuses(results) == {"a": "updated", "b": "unchanged"}
    assert [r.version for r in results] == [2, 1]
    version = Workflow.objects.get(key="a").current_version
    assert (version.version, version.message, version.created_by) == (2, "shorter text", "sync")
    assert WorkflowVersion.objects.filter(workflow__key="b").count() == 1


def test_the_diff_shows_only_what_changed():
    WorkflowFactory(key="a")
    [result] = sync_plan(specs=[spec_of("a", definition=edited("Bye"))])
    changed = [
        line
        for line in result.diff.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert changed == ['-          "body": "Hi {{ payload.name }}",', '+          "body": "Bye",']
    assert result.diff.startswith("--- a v1 (database)\n+++ a (files)\n")


def test_a_settings_change_updates_the_workflow_without_a_version():
    WorkflowFactory(key="a")
    spec = spec_of(
        "a", name="Renamed", critical=True, categories=("news",), concurrency=Concurrency(2)
    )
    [result] = workflows_sync(specs=[spec])
    workflow = Workflow.objects.get(key="a")
    assert result.status == SyncStatus.UPDATED and '+  "critical": true' in result.diff
    assert (workflow.name, workflow.critical, workflow.categories) == ("Renamed", True, ["news"])
    assert workflow.concurrency_limit == 2 and workflow.current_version.version == 1
    assert statuses(workflows_sync(specs=[spec])) == {"a": "unchanged"}


def test_a_setting_left_out_of_the_file_is_reset_to_its_default():
    WorkflowFactory(key="a", priority="high", concurrency=Concurrency(5))
    [result] = workflows_sync(
        specs=[spec_of("a", priority="normal", concurrency=Concurrency(None))]
    )
    workflow = Workflow.objects.get(key="a")
    assert result.status == SyncStatus.UPDATED
    assert (workflow.priority, workflow.concurrency_limit) == ("normal", None)


def test_a_new_workflow_is_created_at_version_one():
    spec = WorkflowSpec(key="new", name="New", definition=email_sms_definition())
    [result] = workflows_sync(specs=[spec], message="first")
    assert (result.status, result.version) == (SyncStatus.CREATED, 1)
    assert result.diff.startswith("--- /dev/null\n+++ new (files)\n")
    assert Workflow.objects.get(key="new").current_version.message == "first"


def test_prune_deactivates_workflows_without_a_file_and_deletes_nothing():
    WorkflowFactory(key="kept")
    WorkflowFactory(key="gone")
    WorkflowFactory(key="already-off", is_active=False)
    assert statuses(sync_plan(specs=[spec_of("kept")])) == {
        "already-off": "only_in_database",
        "gone": "only_in_database",
        "kept": "unchanged",
    }
    results = workflows_sync(specs=[spec_of("kept")], prune=True)
    assert statuses(results) == {
        "already-off": "unchanged",
        "gone": "deactivated",
        "kept": "unchanged",
    }
    assert Workflow.objects.filter(is_active=False).count() == 2
    assert Workflow.objects.count() == 3


def test_prune_within_a_set_of_keys_leaves_the_others_alone():
    WorkflowFactory(key="mine")
    WorkflowFactory(key="theirs")
    results = workflows_sync(specs=[], prune=True, within=["mine"])
    assert statuses(results) == {"mine": "deactivated"}
    assert Workflow.objects.get(key="theirs").is_active


def test_a_dry_run_reports_the_changes_and_writes_nothing():
    WorkflowFactory(key="a")
    WorkflowFactory(key="gone")
    specs = [
        spec_of("a", definition=edited("Bye")),
        WorkflowSpec(key="new", name="N", definition=email_sms_definition()),
    ]
    results = workflows_sync(specs=specs, prune=True, dry_run=True)
    assert statuses(results) == {"a": "updated", "gone": "deactivated", "new": "created"}
    assert all(result.changed for result in results)
    assert WorkflowVersion.objects.count() == 2
    assert not Workflow.objects.filter(key="new").exists()
    assert Workflow.objects.get(key="gone").is_active


def test_running_instances_keep_their_version():
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(key="a"))
    pinned = instance.workflow_version_id
    workflows_sync(specs=[spec_of("a", definition=edited("Bye"))])
    instance.refresh_from_db()
    assert instance.workflow_version_id == pinned
    assert Workflow.objects.get(key="a").current_version_id != pinned
