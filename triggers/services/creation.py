"""Creating one trigger instance (POST /triggers/, events, the admin): the row, or the
existing one for a repeated idempotency key."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils import timezone

from api_keys.models import ApiKey
from notifyflow import metrics
from notifyflow.caching import ProcessCache
from notifyflow.errors import ApplicationError, ConflictError
from notifyflow.ids import uuid7
from workflows.concurrency import key_render
from workflows.models import Workflow, WorkflowVersion

from .. import state
from ..dispatch import dispatch_on_commit
from ..inbox import interests_render
from ..models import TriggerInstance
from ..selectors import instance_by_key

logger = logging.getLogger("notifyflow.triggers")

MAX_IDEMPOTENCY_KEY_LENGTH = 255


@dataclass(frozen=True)
class TriggerCreateResult:
    instance: TriggerInstance
    created: bool


# Workflow key -> workflow (with its current version), so a POST costs no workflow
# query. A save in this process drops it at once (TriggersConfig.ready); other processes
# see an activation change or a new version within the TTL.
workflows_by_key: ProcessCache[Workflow] = ProcessCache(
    name="workflows by key", maxsize=1000, ttl_s=2.0
)


def resolve_workflow(workflow: Workflow | str) -> Workflow:
    if isinstance(workflow, Workflow):
        return workflow
    found = workflows_by_key.get_or_load(
        workflow,
        lambda: Workflow.objects.select_related("current_version").filter(key=workflow).first(),
    )
    if found is None:
        raise ApplicationError(
            field="workflow",
            code="unknown_workflow",
            message=f"workflow: no workflow with key {workflow!r}",
        )
    return found


def trigger_create(
    *,
    workflow: Workflow | str,
    idempotency_key: str,
    payload: dict[str, Any],
    actor: str = "api",
    api_key: ApiKey | None = None,
) -> TriggerCreateResult:
    """Create a trigger instance, or return the existing one for the same key.

    Idempotent under concurrency: the (workflow, idempotency_key) unique constraint
    decides the race; a loser reads the winner's row. The first task message is sent
    only after the row is committed. ``api_key`` is the key that posts (recorded on the
    new instance; None for the admin and internal callers, which may read everything).

    A replay answers with the existing instance whatever the payload posted now (the
    first call's payload is the one that runs). Raises ApplicationError for an unknown,
    inactive or empty workflow; ConflictError ``idempotency_conflict`` - with nothing of
    the instance in it - when the key's instance is one ``api_key`` may not read.
    """
    created_by_key = api_key.name if api_key is not None else ""
    # A repeat returns what the first call returned, whatever the workflow's state
    # now (deactivated since, new version): the statement that would insert reads the
    # existing row instead.
    wf = resolve_workflow(workflow)
    try:
        row = new_row(wf, idempotency_key, payload, created_by_key=created_by_key)
    except ApplicationError:
        # Inactive, no definition, an interest that fails: still a replay if the key
        # has an instance (what the first call returned), else the error.
        existing = instance_by_key(workflow=wf, idempotency_key=idempotency_key)
        if existing is None:
            raise
        return _replay(existing, api_key)
    now = timezone.now()
    # One statement (atomic by itself, no transaction round trips) inserts the instance
    # or, if the key is taken, reads the one that holds it (ON CONFLICT: no error).
    created, existing = state.create_or_find(row=row, now=now, actor=actor, workflow=wf)
    if not created:
        if existing is None:
            # Taken by a POST that committed while ours ran (the unique index made the
            # INSERT wait for it): its row is visible to a new statement.
            existing = instance_by_key(workflow=wf, idempotency_key=idempotency_key)
        if existing is None:
            raise ConflictError(
                code="busy", field=None, message="another request changed this key; try again"
            )
        return _replay(existing, api_key)
    dispatch_on_commit(row.id, lane=row.lane)
    instance = state.as_model(row, now)
    instance._state.adding, instance._state.db = False, connection.alias
    instance.workflow = wf
    instance.workflow_version = _startable_version(wf)  # the version new_row started it on
    metrics.TRIGGERS.labels("created").inc()
    logger.info(
        "trigger created",
        extra={"nf": {"trigger_id": str(row.id), "workflow": wf.key, "actor": actor}},
    )
    return TriggerCreateResult(instance, True)


def _replay(existing: TriggerInstance, api_key: ApiKey | None) -> TriggerCreateResult:
    """The answer to a repeat of ``existing``'s key: the instance, if ``api_key`` may
    read it; else ``idempotency_conflict``, which says nothing of it (payload, vars,
    status, id) - a key must not read through a replay what it cannot GET."""
    if api_key is not None and not api_key.may_read(
        workflow_key=existing.workflow.key, created_by_key=existing.created_by_key
    ):
        raise idempotency_conflict()
    metrics.TRIGGERS.labels("replayed").inc()
    return TriggerCreateResult(existing, False)


def idempotency_conflict() -> ConflictError:
    return ConflictError(
        code="idempotency_conflict",
        field="idempotency_key",
        message="idempotency_key: already used by an instance this API key may not read; "
        "use another key",
    )


def new_row(
    wf: Workflow, idempotency_key: str, payload: dict[str, Any], *, created_by_key: str = ""
) -> state.NewInstance:
    """The new instance ``trigger_create`` inserts for ``idempotency_key``, with its
    rendered interests and concurrency key. Raises ApplicationError for an inactive or
    empty workflow or an interest that does not render."""
    version = _startable_version(wf)
    instance_id = uuid7()  # time-ordered: see notifyflow.ids
    template = wf.concurrency_key_template
    return state.NewInstance(
        id=instance_id,
        workflow_id=wf.pk,
        workflow_version_id=version.pk,
        idempotency_key=idempotency_key,
        payload=payload,
        entry_node_id=version.definition["entry_node_id"],
        created_by_key=created_by_key,
        lane=wf.priority,
        interests=interests_render(
            templates=version.definition.get("interests", ()),
            payload=payload,
            trigger={"id": str(instance_id), "idempotency_key": idempotency_key},
        ),
        concurrency_key=None
        if template is None
        else key_render(
            template=template,
            payload=payload,
            idempotency_key=idempotency_key,
            workflow_key=wf.key,
            recipient_id=None,
        ),
    )


def _startable_version(wf: Workflow) -> WorkflowVersion:
    """The version a new instance of ``wf`` starts on; ApplicationError if none can."""
    if not wf.is_active:
        raise ApplicationError(
            field="workflow",
            code="inactive_workflow",
            message=f"workflow: workflow {wf.key!r} is not active",
        )
    if wf.current_version_id is None:
        raise ApplicationError(
            field="workflow",
            code="workflow_has_no_definition",
            message=f"workflow: workflow {wf.key!r} has no definition",
        )
    version = wf.current_version
    assert version is not None  # current_version_id was checked above
    return version
