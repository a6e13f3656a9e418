"""Writes for trigger instances and API keys. Every way in (API, events, admin) calls these."""

from __future__ import annotations

import json
import secrets
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from notifyflow.api_errors import InputError
from workflows.models import Workflow

from .models import ApiKey, TriggerInstance, TriggerStatus

MAX_IDEMPOTENCY_KEY_LENGTH = 255


@dataclass(frozen=True)
class TriggerCreateResult:
    instance: TriggerInstance
    created: bool


# Per-process cache of workflow key -> workflow (with its current version), so a POST
# costs no workflow query. Saves in this process drop it at once (signal below); other
# processes see an activation change or a new version within this many seconds.
WORKFLOW_CACHE_TTL_S = 2.0
_workflow_cache: dict[str, tuple[float, Workflow]] = {}


def _workflow_by_key(key: str) -> Workflow | None:
    now = time.monotonic()
    hit = _workflow_cache.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    found = Workflow.objects.select_related("current_version").filter(key=key).first()
    if found is not None:
        if len(_workflow_cache) > 1000:
            _workflow_cache.clear()
        _workflow_cache[key] = (now + WORKFLOW_CACHE_TTL_S, found)
    return found


@receiver(post_save, sender=Workflow)
def _forget_workflow(**kwargs: Any) -> None:
    _workflow_cache.clear()


def clear_workflow_cache() -> None:
    _workflow_cache.clear()


def _resolve_workflow(workflow: Workflow | str | None) -> Workflow:
    if isinstance(workflow, Workflow):
        return workflow
    if not isinstance(workflow, str) or not workflow:
        raise InputError(field="workflow", code="required",
                         message="workflow: a workflow key is required")
    found = _workflow_by_key(workflow)
    if found is None:
        raise InputError(field="workflow", code="unknown_workflow",
                         message=f"workflow: no workflow with key {workflow!r}")
    return found


def validate_trigger_input(*, idempotency_key: Any, payload: Any) -> None:
    if not isinstance(idempotency_key, str) or not idempotency_key.strip():
        raise InputError(field="idempotency_key", code="required",
                         message="idempotency_key: must be a non-empty string")
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InputError(field="idempotency_key", code="too_long",
                         message=f"idempotency_key: at most {MAX_IDEMPOTENCY_KEY_LENGTH} "
                                 "characters")
    if not isinstance(payload, dict):
        raise InputError(field="payload", code="not_an_object",
                         message="payload: must be a JSON object")
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    if size > settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES:
        raise InputError(field="payload", code="payload_too_large", status=413,
                         message=f"payload: {size} bytes is over the limit of "
                                 f"{settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES} bytes")


def trigger_create(
    *, workflow: Workflow | str | None, idempotency_key: Any, payload: Any
) -> TriggerCreateResult:
    """Create a trigger instance, or return the existing one for the same key.

    Idempotent under concurrency: the (workflow, idempotency_key) unique constraint
    decides the race; a loser reads the winner's row. The first task message is sent
    only after the row is committed. Raises InputError for invalid input.
    """
    validate_trigger_input(idempotency_key=idempotency_key, payload=payload)
    # A repeat is answered from the existing row (one indexed query) before anything is
    # checked about the workflow's current state: a replay returns what the first call
    # returned, even if the workflow was deactivated since.
    wf = _resolve_workflow(workflow)
    existing = _existing(wf, idempotency_key)
    if existing is not None:
        return TriggerCreateResult(existing, False)
    if not wf.is_active:
        raise InputError(field="workflow", code="inactive_workflow",
                         message=f"workflow: workflow {wf.key!r} is not active")
    if wf.current_version_id is None:
        raise InputError(field="workflow", code="workflow_has_no_definition",
                         message=f"workflow: workflow {wf.key!r} has no definition")
    version = wf.current_version
    now = timezone.now()
    instance = TriggerInstance(
        workflow=wf, workflow_version=version, idempotency_key=idempotency_key,
        payload=payload, status=TriggerStatus.ENQUEUED,
        current_node_id=version.definition["entry_node_id"], vars={}, attempts=0,
        available_at=now, dispatched_at=now,
    )
    # A single INSERT needs no explicit transaction (one round trip, atomic by itself);
    # under an outer transaction a savepoint keeps a lost race from breaking it.
    guard = (transaction.atomic() if transaction.get_connection().in_atomic_block
             else nullcontext())
    try:
        with guard:
            instance.save(force_insert=True)
            from executions.dispatch import dispatch_on_commit

            dispatch_on_commit(instance.pk)
    except IntegrityError:
        # Lost the race for this key: the winner has committed (the unique index made
        # us wait for it), so its row is visible now.
        existing = _existing(wf, idempotency_key)
        if existing is None:
            raise
        return TriggerCreateResult(existing, False)
    return TriggerCreateResult(instance, True)


def _existing(workflow: Workflow | str | None, idempotency_key: str) -> TriggerInstance | None:
    """The instance for (workflow, key) via the unique index; no ORDER BY (the model's
    default ordering would let the planner walk the created_at index instead)."""
    queryset = TriggerInstance.objects.select_related("workflow", "workflow_version").order_by()
    if isinstance(workflow, Workflow):
        queryset = queryset.filter(workflow=workflow, idempotency_key=idempotency_key)
    elif isinstance(workflow, str) and workflow:
        queryset = queryset.filter(workflow__key=workflow, idempotency_key=idempotency_key)
    else:
        return None
    return next(iter(queryset[:1]), None)


def api_key_create(*, name: str) -> tuple[ApiKey, str]:
    """Create an API key; return the row and the raw key (shown once, never stored)."""
    if not name or not name.strip():
        raise InputError(field="name", code="required", message="name: required")
    raw = "nf_" + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(name=name.strip(), prefix=raw[:10], key_hash=ApiKey.hash_key(raw))
    return key, raw


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
