"""A workflow's version history, for the versions API and the console: look a version
up, compare two, and restore an old one as a new version.

Versions are immutable: a restore never touches the version it copies (nor any other),
it adds one on top through ``workflow_save``, so instances pinned to any version keep
running on it."""

from __future__ import annotations

import difflib

from django.db import transaction

from notifyflow.errors import ConflictError, NotFoundError

from .definition import validate_definition
from .models import Workflow, WorkflowVersion
from .services import workflow_save
from .versions import definition_diff, definition_text

# What a diff of the first version is taken against: nothing, like a new file.
NO_VERSION_LABEL = "/dev/null"


def version_label(workflow: Workflow, number: int) -> str:
    return f"{workflow.key} v{number}"


def workflow_version_get(
    *, workflow: Workflow, version: int, field: str = "version"
) -> WorkflowVersion:
    """Version ``version`` of ``workflow``; NotFoundError ``unknown_version`` naming
    ``field`` (the parameter the caller took the number from) when it has none."""
    found = WorkflowVersion.objects.filter(workflow=workflow, version=version).first()
    if found is None:
        raise NotFoundError(
            code="unknown_version",
            field=field,
            message=f"{field}: workflow {workflow.key!r} has no version {version}",
        )
    return found


def workflow_version_diff(
    *, workflow: Workflow, version: WorkflowVersion, against: WorkflowVersion | None
) -> str:
    """The unified diff from ``against`` to ``version`` of their normalised definitions
    ("" when equal); ``against`` None: the whole of ``version`` as added lines."""
    new_label = version_label(workflow, version.version)
    if against is not None:
        return definition_diff(
            against.definition,
            version.definition,
            old_label=version_label(workflow, against.version),
            new_label=new_label,
        )
    return "".join(
        difflib.unified_diff(
            [],
            definition_text(version.definition).splitlines(keepends=True),
            fromfile=NO_VERSION_LABEL,
            tofile=new_label,
        )
    )


def workflow_version_restore(*, workflow: Workflow, version: int, actor: str) -> Workflow:
    """Add a new current version whose definition is version ``version``'s, with the
    message ``restored from v{version}`` and ``actor`` as its author; the workflow's
    name and settings are left as they are.

    Raises NotFoundError ``unknown_version`` for a version the workflow does not have;
    ConflictError (409) ``already_current`` when the current definition already is that
    one (a restore promises a new version, and an unchanged definition never makes one);
    ``DefinitionError`` when the old definition no longer passes today's validator
    (nothing is written: an invalid definition is never stored)."""
    with transaction.atomic():
        # Locked first: two restores (or a restore and a save) take turns, so the
        # "already current" check sees the definition the new version replaces. The
        # current version is read after the lock, by its own query: joined into the
        # locking one, it would be the row of that statement's snapshot, from before
        # the version the lock's previous holder added.
        locked = Workflow.objects.select_for_update().get(pk=workflow.pk)
        source = workflow_version_get(workflow=locked, version=version)
        # As the validator keeps it today: what workflow_save compares and stores.
        definition = validate_definition(source.definition)
        current = locked.current_version
        if current is not None and current.definition == definition:
            raise ConflictError(
                code="already_current",
                field="version",
                message=f"version: the current version (v{current.version}) already has "
                f"the definition of v{version}; nothing to restore",
            )
        return workflow_save(
            key=locked.key,
            name=locked.name,
            is_active=locked.is_active,
            definition=definition,
            workflow=locked,
            actor=actor,
            message=f"restored from v{version}",
        )


__all__ = [
    "workflow_version_diff",
    "workflow_version_get",
    "workflow_version_restore",
]
