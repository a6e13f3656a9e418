"""Per-process cache of pinned workflow versions: a version is immutable, so a worker
loads each one once instead of on every step."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from workflows.models import WorkflowVersion

# The workflow's name can be edited; the context shows it at most this stale.
_NAME_TTL_S = 60.0


@dataclass(frozen=True)
class PinnedVersion:
    id: int
    number: int
    definition: dict[str, Any]
    workflow_id: int
    workflow_key: str
    workflow_name: str
    loaded_at: float


_cache: dict[int, PinnedVersion] = {}


def pinned_version(version_id: int) -> PinnedVersion:
    hit = _cache.get(version_id)
    if hit is not None and time.monotonic() - hit.loaded_at < _NAME_TTL_S:
        return hit
    row = WorkflowVersion.objects.select_related("workflow").get(pk=version_id)
    if len(_cache) > 2000:
        _cache.clear()
    _cache[version_id] = PinnedVersion(
        id=row.pk, number=row.version, definition=row.definition, workflow_id=row.workflow_id,
        workflow_key=row.workflow.key, workflow_name=row.workflow.name,
        loaded_at=time.monotonic(),
    )
    return _cache[version_id]


def clear_cache() -> None:
    _cache.clear()
