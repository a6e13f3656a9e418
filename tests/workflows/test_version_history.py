"""A workflow's version history: a version looked up (or ``unknown_version`` naming the
parameter), the diff between two (the first against nothing), and a restore that adds
a version with the old definition and leaves every existing version as it was."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from notifyflow.errors import ConflictError, NotFoundError
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from workflows.definition import DefinitionError
from workflows.models import Workflow, WorkflowVersion
from workflows.services import workflow_save
from workflows.version_history import (
    workflow_version_diff,
    workflow_version_get,
    workflow_version_restore,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def workflow() -> Workflow:
    """v1 plain, v2 with a one-hour wait, v3 with a five-minute wait."""
    WorkflowFactory(key="welcome", name="Welcome")
    for delay in ("1h", "5m"):
        saved = workflow_save(
            key="welcome", name="Welcome", definition=email_sms_definition(delay=delay)
        )
    return saved


def test_an_unknown_version_is_not_found_naming_the_parameter(workflow):
    assert workflow_version_get(workflow=workflow, version=2).version == 2
    with pytest.raises(NotFoundError) as caught:
        workflow_version_get(workflow=workflow, version=4, field="against")
    assert (caught.value.code, caught.value.field) == ("unknown_version", "against")


def test_the_diff_shows_what_changed_between_two_versions(workflow):
    v2, v3 = (workflow_version_get(workflow=workflow, version=n) for n in (2, 3))
    diff = workflow_version_diff(workflow=workflow, version=v3, against=v2)
    changed = [line for line in diff.splitlines() if line[:1] in "+-"]
    assert changed == [
        "--- welcome v2",
        "+++ welcome v3",
        '-        "duration": "1h"',
        '+        "duration": "5m"',
    ]
    assert workflow_version_diff(workflow=workflow, version=v3, against=v3) == ""


def test_the_first_version_diffs_against_nothing(workflow):
    v1 = workflow_version_get(workflow=workflow, version=1)
    lines = workflow_version_diff(workflow=workflow, version=v1, against=None).splitlines()
    assert lines[:2] == ["--- /dev/null", "+++ welcome v1"]
    assert all(line.startswith("+") for line in lines[3:])
    assert '+  "entry_node_id": "hello",' in lines


def test_restore_adds_a_version_with_the_old_definition_and_keeps_history(workflow):
    pinned = TriggerInstanceFactory(workflow=workflow)
    before = {v.pk: v.definition for v in WorkflowVersion.objects.filter(workflow=workflow)}
    restored = workflow_version_restore(workflow=workflow, version=1, actor="ann")
    new = restored.current_version
    assert (new.version, new.message, new.created_by) == (4, "restored from v1", "ann")
    assert new.definition == WorkflowVersion.objects.get(workflow=workflow, version=1).definition
    after = {v.pk: v.definition for v in WorkflowVersion.objects.filter(workflow=workflow)}
    assert {pk: after[pk] for pk in before} == before
    pinned.refresh_from_db()
    assert pinned.workflow_version.version == 3
    assert TriggerInstanceFactory(workflow=restored).workflow_version.version == 4


def test_restore_keeps_the_workflows_name_and_settings(workflow):
    workflow_save(
        key="welcome",
        name="Renamed",
        is_active=False,
        definition=email_sms_definition(delay="5m"),
        priority="high",
    )
    restored = workflow_version_restore(workflow=workflow, version=1, actor="ann")
    assert (restored.name, restored.is_active, restored.priority) == ("Renamed", False, "high")


def test_restoring_the_current_definition_is_refused_and_adds_nothing(workflow):
    with pytest.raises(ConflictError) as caught:
        workflow_version_restore(workflow=workflow, version=3, actor="ann")
    assert caught.value.code == "already_current"
    # An older version with the same definition as the current one: the same answer.
    workflow_version_restore(workflow=workflow, version=1, actor="ann")
    with pytest.raises(ConflictError):
        workflow_version_restore(workflow=workflow, version=1, actor="ann")
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 4


def test_restoring_an_unknown_version_is_not_found(workflow):
    with pytest.raises(NotFoundError) as caught:
        workflow_version_restore(workflow=workflow, version=9, actor="ann")
    assert (caught.value.code, caught.value.field) == ("unknown_version", "version")


def test_an_old_definition_that_no_longer_validates_is_not_restored(workflow):
    # A version written before a validator rule it breaks (bypassing the service).
    broken = {"entry_node_id": "gone", "nodes": [], "edges": []}
    WorkflowVersion.objects.create(workflow=workflow, version=4, definition=broken)
    with pytest.raises(DefinitionError):
        workflow_version_restore(workflow=workflow, version=4, actor="ann")
    workflow.refresh_from_db()
    assert workflow.current_version.version == 3
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 4


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_restores_of_one_version_add_one_version():
    """Without the row lock taken before the "already current" check, every racer
    would read v3 as current and report success for one new version."""
    WorkflowFactory(key="raced", name="Raced")
    workflow = workflow_save(key="raced", name="Raced", definition=email_sms_definition(delay="1h"))
    racers = 6
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []

    def restore() -> None:
        try:
            barrier.wait()
            try:
                workflow_version_restore(workflow=workflow, version=1, actor="racer")
                outcomes.append("restored")
            except ConflictError as exc:
                outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=restore) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["already_current"] * (racers - 1) + ["restored"]
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 3
