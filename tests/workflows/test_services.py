"""Saving a workflow (``workflow_save``): created with version 1; a changed definition
adds a version, an unchanged one does not; settings left unset keep what the workflow
has; an invalid definition writes nothing; a taken key is refused on create-only.
Pausing and deactivating change only their flag."""

from __future__ import annotations

import pytest

from notifyflow.errors import ConflictError
from tests.factories import email_sms_definition
from workflows.concurrency import NO_LIMIT, Concurrency
from workflows.definition import DefinitionError
from workflows.models import Workflow, WorkflowVersion
from workflows.services import workflow_save, workflow_set_active, workflow_set_paused

pytestmark = pytest.mark.django_db


def save(**fields):
    fields.setdefault("definition", email_sms_definition())
    fields.setdefault("name", "Welcome")
    return workflow_save(key="welcome", **fields)


def test_a_new_workflow_starts_at_version_1_with_the_normalized_definition():
    wf = save(actor="ann")
    version = wf.current_version
    assert (version.version, version.created_by) == (1, "ann")
    assert version.definition["entry_node_id"] == "hello"
    assert (wf.priority, wf.critical, wf.concurrency_limit) == ("normal", False, None)


def test_a_changed_definition_adds_a_version_and_an_unchanged_one_does_not():
    first = save().current_version
    assert save().current_version.pk == first.pk
    changed = save(definition=email_sms_definition(delay="1h")).current_version
    assert changed.version == 2 and changed.pk != first.pk
    assert WorkflowVersion.objects.get(pk=first.pk).definition == first.definition


def test_settings_left_unset_keep_what_the_workflow_has():
    save(critical=True, categories=["news"], priority="high", concurrency=Concurrency(limit=3))
    wf = save(name="Renamed")
    assert (wf.name, wf.critical, wf.categories, wf.priority) == ("Renamed", True, ["news"], "high")
    assert wf.concurrency_limit == 3
    assert save(concurrency=NO_LIMIT).concurrency_limit is None


def test_an_invalid_definition_writes_nothing():
    with pytest.raises(DefinitionError):
        save(definition={"nodes": []})
    assert not Workflow.objects.exists() and not WorkflowVersion.objects.exists()


def test_create_only_refuses_a_taken_key_naming_it():
    save()
    with pytest.raises(ConflictError) as refused:
        save(create_only=True)
    assert (refused.value.code, refused.value.field) == ("duplicate_key", "key")
    assert WorkflowVersion.objects.count() == 1


def test_pausing_and_deactivating_change_only_their_flag():
    wf = save()
    workflow_set_paused(workflow=wf, is_paused=True)
    workflow_set_active(workflow=wf, is_active=False)
    stored = Workflow.objects.get()
    assert (stored.is_paused, stored.is_active) == (True, False)
    assert stored.current_version_id == wf.current_version_id
