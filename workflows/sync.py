"""Syncing workflows from files: what ``manage.py workflows diff|sync`` and
``POST /api/v1/workflows/sync/`` do with specs already read and validated
(``workflows.files``; nothing comes here while any workflow is invalid).

``sync_plan`` compares each spec with the stored workflow (every setting and the
definition) and says, per workflow, what a sync would do, with the diff; ``workflows_sync``
applies a plan in one transaction: one new version per changed definition (with the
message), a settings-only change updates the workflow without a version, unchanged ones
are left alone, and ``prune`` deactivates - never deletes - workflows that have no file.
Running instances keep the version they pinned."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from django.db import transaction

from notifyflow.errors import ApplicationError
from translations.selectors import catalogue_list
from translations.services import catalogues_replace

from .concurrency import NO_LIMIT, Concurrency
from .files import FileProblem, WorkflowSpec, spec_from_document
from .models import Workflow
from .services import workflow_save, workflow_set_active
from .versions import definition_diff, definition_text

# created_by of the versions the command writes.
COMMAND_ACTOR = "sync"


class SyncStatus(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DEACTIVATED = "deactivated"
    # No file, and no --prune: left alone.
    ONLY_IN_DATABASE = "only_in_database"


CHANGES = frozenset({SyncStatus.CREATED, SyncStatus.UPDATED, SyncStatus.DEACTIVATED})


@dataclass(frozen=True)
class SyncResult:
    """What a sync does (or did) to one workflow. ``version``: its current version
    number once done (before, for a dry run; None for a workflow not yet created);
    ``diff``: a unified diff of the settings and normalised definition ("" unchanged)."""

    key: str
    status: SyncStatus
    diff: str = ""
    version: int | None = None
    spec: WorkflowSpec | None = None

    @property
    def changed(self) -> bool:
        return self.status in CHANGES


def workflow_spec(workflow: Workflow) -> WorkflowSpec | None:
    """A stored workflow as a spec (what ``export`` writes); None without a version."""
    definition = workflow.definition
    if definition is None:
        return None
    limit = workflow.concurrency_limit
    return WorkflowSpec(
        key=workflow.key,
        name=workflow.name,
        definition=definition,
        is_active=workflow.is_active,
        critical=workflow.critical,
        categories=tuple(workflow.categories or ()),
        priority=workflow.priority,
        concurrency=NO_LIMIT if limit is None else Concurrency(limit, workflow.concurrency_key),
        default_locale=workflow.default_locale,
        translations={c.locale: c.messages for c in catalogue_list(namespace=workflow.key)} or None,
    )


def specs_from_documents(documents: Sequence[Any]) -> list[WorkflowSpec]:
    """Workflow documents (``POST /workflows/sync/``'s ``workflows``) as specs. Raises
    ``ApplicationError`` (400) listing every problem of every document, each field
    ``workflows[i].<field>`` naming the node when there is one; nothing is returned
    while any is invalid."""
    specs: list[WorkflowSpec] = []
    problems: list[FileProblem] = []
    seen: set[str] = set()
    for index, document in enumerate(documents):
        spec, found = spec_from_document(document, file=f"workflows[{index}]")
        problems.extend(found)
        if spec is not None and spec.key in seen:
            message = f"key {spec.key!r} is given twice"
            problems.append(
                FileProblem(f"workflows[{index}]", "key", message, code="duplicate_key")
            )
        elif spec is not None:
            seen.add(spec.key)
            specs.append(spec)
    if problems:
        details = [_problem_detail(problem) for problem in problems]
        first = details[0]
        raise ApplicationError(
            code=str(first["code"]),
            field=first["field"],
            message=str(first["message"]),
            details=details,
        )
    return specs


def _problem_detail(problem: FileProblem) -> dict[str, str | None]:
    field = f"{problem.file}.{problem.field}" if problem.field else problem.file
    node = f" (node {problem.node!r})" if problem.node else ""
    return {"field": field, "code": problem.code, "message": f"{field}: {problem.message}{node}"}


def sync_plan(
    *, specs: Sequence[WorkflowSpec], prune: bool = False, within: Collection[str] | None = None
) -> list[SyncResult]:
    """What syncing ``specs`` would do, by key. ``within``: only these stored workflows
    are considered (an API key limited to workflows prunes none of the others)."""
    stored = Workflow.objects.select_related("current_version")
    if within is not None:
        stored = stored.filter(key__in=within)
    existing = {workflow.key: workflow for workflow in stored}
    results = [_compare(spec, existing.get(spec.key)) for spec in specs]
    given = {spec.key for spec in specs}
    for key, workflow in existing.items():
        if key not in given:
            results.append(_without_file(workflow, prune=prune))
    return sorted(results, key=lambda result: result.key)


def workflows_sync(
    *,
    specs: Sequence[WorkflowSpec],
    prune: bool = False,
    dry_run: bool = False,
    message: str = "",
    actor: str = COMMAND_ACTOR,
    within: Collection[str] | None = None,
) -> list[SyncResult]:
    """Plan and (unless ``dry_run``) apply, all in one transaction: either every change
    is written or none. Keys must be unique in ``specs``."""
    with transaction.atomic():
        if not dry_run:
            # Two syncs at once: the second plans once the first has committed.
            list(Workflow.objects.select_for_update().filter(key__in=[s.key for s in specs]))
        plan = sync_plan(specs=specs, prune=prune, within=within)
        if dry_run:
            return plan
        return [_apply(result, message=message, actor=actor) for result in plan]


def _compare(spec: WorkflowSpec, workflow: Workflow | None) -> SyncResult:
    if workflow is None:
        return SyncResult(
            spec.key, SyncStatus.CREATED, diff=_diff(None, spec, label=spec.key), spec=spec
        )
    version = workflow.current_version.version if workflow.current_version else None
    current = workflow_spec(workflow)
    if current is not None and spec.translations is None:
        current = replace(current, translations=None)  # not given: left alone
    if current is not None and current.document() == spec.document():
        return SyncResult(spec.key, SyncStatus.UNCHANGED, version=version)
    label = f"{spec.key} v{version}" if version else spec.key
    return SyncResult(
        spec.key,
        SyncStatus.UPDATED,
        diff=_diff(current, spec, label=label),
        version=version,
        spec=spec,
    )


def _without_file(workflow: Workflow, *, prune: bool) -> SyncResult:
    version = workflow.current_version.version if workflow.current_version else None
    if not prune:
        return SyncResult(workflow.key, SyncStatus.ONLY_IN_DATABASE, version=version)
    if not workflow.is_active:
        return SyncResult(workflow.key, SyncStatus.UNCHANGED, version=version)
    diff = definition_diff(
        {"is_active": True},
        {"is_active": False},
        old_label=f"{workflow.key} (database)",
        new_label=f"{workflow.key} (no file)",
    )
    return SyncResult(workflow.key, SyncStatus.DEACTIVATED, diff=diff, version=version)


def _diff(old: WorkflowSpec | None, new: WorkflowSpec, *, label: str) -> str:
    """The unified diff of two specs' documents; from nothing for a new workflow."""
    before = definition_text(old.document()).splitlines(keepends=True) if old else []
    after = definition_text(new.document()).splitlines(keepends=True)
    old_label = f"{label} (database)" if old else "/dev/null"
    return "".join(
        difflib.unified_diff(before, after, fromfile=old_label, tofile=f"{new.key} (files)")
    )


def _apply(result: SyncResult, *, message: str, actor: str) -> SyncResult:
    if result.status == SyncStatus.DEACTIVATED:
        workflow_set_active(workflow=Workflow.objects.get(key=result.key), is_active=False)
        return result
    spec = result.spec
    if spec is None or not result.changed:
        return result
    if spec.translations is not None:  # before the workflow: its keys are checked
        catalogues_replace(namespace=spec.key, catalogues=spec.translations, actor=actor)
    workflow = workflow_save(
        key=spec.key,
        name=spec.name,
        definition=spec.definition,
        is_active=spec.is_active,
        actor=actor,
        message=message,
        critical=spec.critical,
        categories=spec.categories,
        concurrency=spec.concurrency,
        priority=spec.priority,
        default_locale=spec.default_locale,
    )
    version = workflow.current_version.version if workflow.current_version else None
    return SyncResult(result.key, result.status, diff=result.diff, version=version, spec=spec)


def results_summary(results: Sequence[SyncResult]) -> str:
    """How many workflows per status, e.g. ``1 updated, 2 unchanged``."""
    counts = Counter(result.status.value for result in results)
    return ", ".join(f"{count} {status}" for status, count in sorted(counts.items())) or "none"
