"""Writes to workflows: the API, the admin and the demo loader all come through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction

from notifyflow.errors import ConflictError
from translations.locales import locale_check

from .concurrency import Concurrency
from .definition import DefinitionError, validate_definition
from .definition.translation_keys import check_translation_keys
from .models import Workflow, WorkflowVersion


def workflow_save(
    *,
    key: str,
    name: str,
    definition: Any,
    is_active: bool = True,
    actor: str = "",
    message: str = "",
    workflow: Workflow | None = None,
    create_only: bool = False,
    critical: bool | None = None,
    categories: Sequence[str] | None = None,
    concurrency: Concurrency | None = None,
    priority: str | None = None,
    default_locale: str | None = None,
) -> Workflow:
    """Create or update a workflow. A changed definition adds an immutable version.
    ``critical`` and ``categories`` (send settings), ``concurrency`` and ``priority`` (a
    ``Priority`` value, its lane) left None keep what the workflow has (false,
    none, no limit and normal for a new one); ``concurrency.NO_LIMIT`` removes a limit.
    Instances created before a change keep the key and the lane they were given; the
    claim reads the current limit. ``default_locale`` ("" for the setting's) is checked
    like any locale (400 ``invalid_locale``), and a template using a translation key
    that locale's catalogue lacks is a ``translation_missing`` problem.

    ``message`` is kept on the new version (none when the definition is unchanged).
    ``workflow`` None saves by ``key`` (creating it if new); ``create_only`` refuses an
    existing key. Raises ``DefinitionError`` (nothing written) for an invalid
    definition and ``ConflictError`` (409) ``duplicate_key`` for a taken key, also when
    two requests race for it (the unique constraint decides).
    """
    settings: dict[str, Any] = {
        field: value
        for field, value in (
            ("critical", critical),
            ("categories", categories),
            ("priority", priority),
            ("default_locale", default_locale),
        )
        if value is not None
    }
    if default_locale:
        locale_check(default_locale, field="default_locale")
    if concurrency is not None:
        settings |= {"concurrency_limit": concurrency.limit, "concurrency_key": concurrency.key}
    try:
        with transaction.atomic():
            return _save(
                key=key,
                name=name,
                definition=definition,
                is_active=is_active,
                actor=actor,
                message=message,
                workflow=workflow,
                create_only=create_only,
                settings=settings,
            )
    except IntegrityError as exc:
        if not Workflow.objects.filter(key=key).exists():
            raise
        raise _duplicate(key) from exc


def _duplicate(key: str) -> ConflictError:
    return ConflictError(
        code="duplicate_key",
        field="key",
        message=f"key: a workflow with key {key!r} exists; use PUT",
    )


def _save(
    *,
    key: str,
    name: str,
    definition: Any,
    is_active: bool,
    actor: str,
    message: str,
    workflow: Workflow | None,
    create_only: bool,
    settings: dict[str, Any],
) -> Workflow:
    clean = validate_definition(definition)
    if workflow is None:
        workflow = Workflow.objects.select_for_update().filter(key=key).first()
        if workflow is not None and create_only:
            raise _duplicate(key)
    else:
        workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
    locale = settings.get("default_locale", workflow.default_locale if workflow else "")
    problems = check_translation_keys(clean["nodes"], namespace=key, locale=locale)
    if problems:
        raise DefinitionError(problems)
    if workflow is None:
        workflow = Workflow.objects.create(key=key, name=name, is_active=is_active)
    else:
        workflow.key, workflow.name, workflow.is_active = key, name, is_active
    for field, value in settings.items():
        setattr(workflow, field, list(value) if field == "categories" else value)
    current = workflow.current_version
    if current is None or current.definition != clean:
        number = (current.version if current else 0) + 1
        workflow.current_version = WorkflowVersion.objects.create(
            workflow=workflow,
            version=number,
            definition=clean,
            created_by=actor[:150],
            message=message[:500],
        )
    workflow.save()
    return workflow


def workflow_set_paused(*, workflow: Workflow, is_paused: bool) -> Workflow:
    workflow.is_paused = is_paused
    workflow.save(update_fields=["is_paused", "updated_at"])
    return workflow


def workflow_set_active(*, workflow: Workflow, is_active: bool) -> Workflow:
    workflow.is_active = is_active
    workflow.save(update_fields=["is_active", "updated_at"])  # post_save drops caches
    return workflow
