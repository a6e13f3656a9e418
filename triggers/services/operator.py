"""Operator actions on one instance (API, admin): retry, run now, cancel; pausing and
resuming a workflow. The operator is the audited actor. Each raises NotFoundError or a
ConflictError naming why it cannot act; nothing is written then."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from notifyflow import metrics
from notifyflow.errors import ApplicationError, ConflictError, NotFoundError
from notifyflow.text import check_storable
from workflows.models import Workflow
from workflows.services import workflow_set_paused

from .. import state
from ..dispatch import dispatch_many_on_commit
from ..fanout import fanout_cancel
from ..models import TERMINAL_STATUSES as TERMINAL
from ..models import FanOut, TriggerInstance, TriggerStatus
from ..selectors import instance_or_404

logger = logging.getLogger("notifyflow.triggers")


def _existing(workflow: Workflow | str, idempotency_key: str) -> TriggerInstance | None:
    """The instance for (workflow, key) via the unique index; no ORDER BY (the model's
    default ordering would let the planner walk the created_at index instead)."""
    queryset = TriggerInstance.objects.select_related("workflow", "workflow_version").order_by()
    if isinstance(workflow, Workflow):
        queryset = queryset.filter(workflow=workflow, idempotency_key=idempotency_key)
    else:
        queryset = queryset.filter(workflow__key=workflow, idempotency_key=idempotency_key)
    return next(iter(queryset[:1]), None)


def instance_retry(*, instance_id: uuid.UUID | str, actor: str) -> TriggerInstance:
    """failed -> enqueued now, attempts reset, on the same version with the same payload.

    Returns the instance as it is after the retry. Raises NotFoundError, or
    ConflictError ``not_failed`` naming the current status (nothing is written then).
    """
    # The fenced write first: the usual case (a failed instance) costs no read before it.
    if not state.retry(instance_id=instance_id, actor=actor):
        instance = instance_or_404(instance_id)
        raise ConflictError(
            code="not_failed",
            field=None,
            message=f"instance {instance.pk} is {instance.status}; only a failed instance "
            "can be retried",
        )
    return instance_or_404(instance_id)


def instance_retry_on_latest_version(*, instance_id: uuid.UUID | str, actor: str) -> int:
    """Retry a failed instance on its workflow's current version (the fix for a render
    error is usually a new version): the new version is pinned and the audit row names
    both. Returns the version number now pinned.

    Raises NotFoundError; ConflictError ``not_failed``, ``no_newer_version`` (already on
    the current one: a plain retry does that) or ``node_not_in_version`` (the node the
    instance stopped at is not in the new version)."""
    instance = instance_or_404(instance_id)
    _require_failed(instance)
    latest = instance.workflow.current_version
    if latest is None or latest.pk == instance.workflow_version_id:
        raise ConflictError(
            code="no_newer_version",
            field=None,
            message=f"instance {instance.pk} already runs on the workflow's current version",
        )
    node_ids = {node["id"] for node in latest.definition.get("nodes", [])}
    if instance.current_node_id not in node_ids:
        raise ConflictError(
            code="node_not_in_version",
            field=None,
            message=f"node {instance.current_node_id!r} is not in version v{latest.version}",
        )
    old = instance.workflow_version.version
    moved = state.retry(
        instance_id=instance.pk,
        actor=actor,
        reason=f"retried by operator on workflow version v{latest.version} (was v{old})",
        workflow_version_id=latest.pk,
        lane=instance.lane,
        expect={"workflow_version_id": instance.workflow_version_id},
        details={"old_version": old, "new_version": latest.version},
    )
    if not moved:
        raise ConflictError(
            code="busy", field=None, message=f"instance {instance.pk} changed state; try again"
        )
    return latest.version


def instance_edit_payload_and_retry(
    *, instance_id: uuid.UUID | str, actor: str, payload: dict[str, Any]
) -> TriggerInstance:
    """Replace a failed instance's payload and retry it (on its pinned version). The
    audit row keeps the old and the new payload. The caller checks the operator's
    permission; ``payload`` must be a JSON object (ApplicationError naming ``payload``).

    Raises NotFoundError; ConflictError ``not_failed``."""
    if not isinstance(payload, dict):
        raise ApplicationError(
            code="not_an_object", field="payload", message="payload: must be a JSON object"
        )
    check_storable(payload, "payload")
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    if size > settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES:
        raise ApplicationError(
            code="payload_too_large",
            field="payload",
            status=413,
            message=f"payload: {size} bytes is over the limit of "
            f"{settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES} bytes",
        )
    instance = instance_or_404(instance_id)
    _require_failed(instance)
    moved = state.retry(
        instance_id=instance.pk,
        actor=actor,
        reason="payload edited and retried by operator",
        payload=payload,
        lane=instance.lane,
        details={"old_payload": instance.payload, "new_payload": payload},
    )
    if not moved:
        raise ConflictError(
            code="busy", field=None, message=f"instance {instance.pk} changed state; try again"
        )
    instance.refresh_from_db()
    return instance


def _require_failed(instance: TriggerInstance) -> None:
    if instance.status != TriggerStatus.FAILED:
        raise ConflictError(
            code="not_failed",
            field=None,
            message=f"instance {instance.pk} is {instance.status}, not failed",
        )


def instance_run_now(
    *, instance_id: uuid.UUID | str, actor: str, reason: str = ""
) -> TriggerInstance:
    """Run a waiting enqueued instance now: skip its delay or retry backoff, or end its
    wait as timed out (``state.run_now``). The caller's ``reason`` goes into the
    audit row.

    Returns the instance, now due. Raises NotFoundError, or ConflictError
    ``not_waiting`` naming the current status (finished, running, or already due).
    """
    if not state.run_now(instance_id=instance_id, actor=actor, reason=reason):
        instance = instance_or_404(instance_id)
        why = "already due" if instance.status == TriggerStatus.ENQUEUED else instance.status
        raise ConflictError(
            code="not_waiting",
            field=None,
            message=f"instance {instance.pk} is {why}; only an enqueued instance waiting "
            "on a delay, a wait or a retry can run now",
        )
    return instance_or_404(instance_id)


def instance_cancel(
    *, instance_id: uuid.UUID | str, actor: str, reason: str = ""
) -> TriggerInstance:
    """Cancel an unfinished instance: its pending delay, retry or wait never runs; a step
    running now finishes and records its delivery but does not advance. The caller's
    ``reason`` goes into the audit row. Raises NotFoundError, or ConflictError
    ``already_finished`` (naming the status) for a finished instance."""
    for _ in range(3):  # the status may move between the read and the fenced write
        instance = instance_or_404(instance_id)
        if instance.is_terminal:
            raise ConflictError(
                code="already_finished",
                field=None,
                message=f"instance {instance.pk} is already {instance.status}",
            )
        why = reason.strip() or "cancelled"
        if state.cancel(
            instance_id=instance.pk, from_status=instance.status, reason=why, actor=actor
        ):
            metrics.CANCELLED.inc()
            instance.refresh_from_db()
            return instance
    raise ConflictError(
        code="busy", field=None, message=f"instance {instance_id} changed state; try again"
    )


@dataclass(frozen=True)
class KeyCancelResult:
    """Cancel by key of a trigger that named recipients: how many of the key's instances
    were cancelled, how many had already finished, and its fan-out (if any)."""

    workflow: Workflow
    idempotency_key: str
    cancelled: int
    already_finished: int
    fanout: FanOut | None


def instance_cancel_by_key(
    *, workflow: str, idempotency_key: str, actor: str, reason: str = ""
) -> TriggerInstance | KeyCancelResult:
    """``instance_cancel`` for the instance of (workflow key, idempotency key). A key
    whose trigger named recipients cancels its running fan-out (the job stops
    at its next batch) and every unfinished instance of the key: a ``KeyCancelResult``."""
    wf = Workflow.objects.filter(key=workflow).first()
    if wf is not None and (
        FanOut.objects.filter(workflow=wf, idempotency_key=idempotency_key).exists()
        or TriggerInstance.objects.filter(
            workflow=wf, idempotency_key=idempotency_key, recipient__isnull=False
        ).exists()
    ):
        return _cancel_people(wf, idempotency_key, actor=actor, reason=reason)
    found = _existing(workflow, idempotency_key)
    if found is None:
        raise NotFoundError(
            code="not_found",
            field="idempotency_key",
            message=f"idempotency_key: no instance of workflow {workflow!r} with this key",
        )
    return instance_cancel(instance_id=found.pk, actor=actor, reason=reason)


def _cancel_people(
    wf: Workflow, idempotency_key: str, *, actor: str, reason: str
) -> KeyCancelResult:
    # The fan-out first: once it is cancelled (after any batch in flight committed) no
    # instance of the key appears any more, so the read below sees them all.
    fanout = fanout_cancel(workflow=wf, idempotency_key=idempotency_key)
    why = reason.strip() or "cancelled"
    rows = TriggerInstance.objects.order_by().filter(workflow=wf, idempotency_key=idempotency_key)
    unfinished = list(rows.exclude(status__in=TERMINAL).values_list("id", flat=True))
    cancelled = state.cancel_many(instance_ids=unfinished, reason=why, actor=actor)
    metrics.CANCELLED.inc(cancelled)
    finished = rows.filter(status__in=TERMINAL).count() - cancelled
    logger.info(
        "cancelled by key",
        extra={"nf": {"workflow": wf.key, "cancelled": cancelled, "actor": actor}},
    )
    return KeyCancelResult(wf, idempotency_key, cancelled, finished, fanout)


def workflow_pause(*, workflow: Workflow, actor: str) -> Workflow:
    """No step of the workflow's instances starts until resumed (the claim checks it);
    triggers and events are still accepted."""
    workflow_set_paused(workflow=workflow, is_paused=True)
    logger.warning("workflow %s paused by %s", workflow.key, actor)
    return workflow


def workflow_resume(*, workflow: Workflow, actor: str, batch: int = 10_000) -> Workflow:
    """Unpause, and dispatch the instances that became due meanwhile at once (later ones
    keep their own messages or the sweeper's)."""
    workflow_set_paused(workflow=workflow, is_paused=False)
    now = timezone.now()
    with transaction.atomic():
        due = list(
            TriggerInstance.objects.filter(
                workflow=workflow, status=TriggerStatus.ENQUEUED, available_at__lte=now
            ).values_list("id", "lane")[:batch]
        )
        TriggerInstance.objects.filter(pk__in=[pk for pk, _ in due]).update(dispatched_at=now)
        dispatch_many_on_commit(due)
    logger.warning(
        "workflow %s resumed by %s; %d due instances dispatched", workflow.key, actor, len(due)
    )
    return workflow
