"""Writes to workflows: the API, the admin and the demo loader all come through here."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .definition import validate_definition
from .models import Workflow, WorkflowVersion


@transaction.atomic
def workflow_save(
    *,
    key: str,
    name: str,
    definition: Any,
    is_active: bool = True,
    actor: str = "",
    workflow: Workflow | None = None,
) -> Workflow:
    """Create or update a workflow. A changed definition adds an immutable version.

    Raises ``DefinitionError`` (nothing written) when the definition is invalid.
    """
    clean = validate_definition(definition)
    if workflow is None:
        workflow = Workflow.objects.select_for_update().filter(key=key).first()
    else:
        workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
    if workflow is None:
        workflow = Workflow.objects.create(key=key, name=name, is_active=is_active)
    else:
        workflow.key, workflow.name, workflow.is_active = key, name, is_active
    current = workflow.current_version
    if current is None or current.definition != clean:
        number = (current.version if current else 0) + 1
        workflow.current_version = WorkflowVersion.objects.create(
            workflow=workflow, version=number, definition=clean, created_by=actor
        )
    workflow.save()
    return workflow


def workflow_set_active(*, workflow: Workflow, is_active: bool) -> Workflow:
    workflow.is_active = is_active
    workflow.save(update_fields=["is_active", "updated_at"])  # post_save drops caches
    return workflow
