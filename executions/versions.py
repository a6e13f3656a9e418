"""Per-process cache of pinned workflow versions: a version is immutable, so a worker
loads each one once instead of on every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notifyflow.caching import ProcessCache
from workflows.models import WorkflowVersion


@dataclass(frozen=True)
class PinnedVersion:
    id: int
    number: int
    definition: dict[str, Any]
    workflow_id: int
    workflow_key: str
    workflow_name: str


# The definition never changes; the workflow's name can be edited, and the context
# shows it at most this stale.
pinned_versions: ProcessCache[PinnedVersion] = ProcessCache(
    name="pinned versions", maxsize=2000, ttl_s=60.0
)


def _load(version_id: int) -> PinnedVersion:
    row = WorkflowVersion.objects.select_related("workflow").get(pk=version_id)
    return PinnedVersion(
        id=row.pk,
        number=row.version,
        definition=row.definition,
        workflow_id=row.workflow_id,
        workflow_key=row.workflow.key,
        workflow_name=row.workflow.name,
    )


def pinned_version(version_id: int) -> PinnedVersion:
    version = pinned_versions.get_or_load(version_id, lambda: _load(version_id))
    assert version is not None  # _load raises DoesNotExist rather than return None
    return version
