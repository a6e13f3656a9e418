"""The new instances of a trigger that names recipients: one row per
recipient, for ``state.create_bulk`` - the request's own entries and the fan-out's
batches alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from notifyflow.ids import uuid7
from workflows.concurrency import key_render
from workflows.models import WorkflowVersion

from . import state
from .inbox import interests_render


def recipient_rows(
    *,
    workflow_id: int,
    version: WorkflowVersion,
    idempotency_key: str,
    payload: dict[str, Any],
    recipient_ids: Sequence[str],
    created_by_key: str,
    lane: str,
    workflow_key: str = "",
    concurrency_key_template: str | None = None,
) -> list[state.NewInstance]:
    """The rows ``state.create_bulk`` inserts for ``recipient_ids`` (also the fan-out's
    batches), in ``lane``. Interests are rendered per instance only if the definition
    has any; the concurrency key only if the workflow has a limit
    (``concurrency_key_template`` not None: ``Workflow.concurrency_key_template``)."""
    templates = version.definition.get("interests", ())
    entry = version.definition["entry_node_id"]
    rows = []
    for recipient_id in recipient_ids:
        instance_id = uuid7()
        interests = (
            interests_render(
                templates=templates,
                payload=payload,
                trigger={"id": str(instance_id), "idempotency_key": idempotency_key},
            )
            if templates
            else ()
        )
        rows.append(
            state.NewInstance(
                id=instance_id,
                workflow_id=workflow_id,
                workflow_version_id=version.pk,
                idempotency_key=idempotency_key,
                payload=payload,
                entry_node_id=entry,
                interests=interests,
                created_by_key=created_by_key,
                recipient_id=recipient_id,
                concurrency_key=None
                if concurrency_key_template is None
                else key_render(
                    template=concurrency_key_template,
                    payload=payload,
                    idempotency_key=idempotency_key,
                    workflow_key=workflow_key,
                    recipient_id=recipient_id,
                ),
                lane=lane,
            )
        )
    return rows
