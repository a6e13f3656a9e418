"""Writes for trigger instances and API keys. Every way in (API, events, admin) calls these.

Input has been validated at the edge (DRF serializers, admin forms); these take typed
arguments and raise ``ApplicationError`` for what only the domain can decide (an unknown
or inactive workflow, a finished instance).
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from notifyflow import metrics
from notifyflow.caching import ProcessCache
from notifyflow.errors import ApplicationError, ConflictError, NotFoundError
from notifyflow.ids import uuid7
from notifyflow.parsers import check_storable
from notifyflow.throttling import validate_rate
from workflows.models import Workflow, WorkflowVersion
from workflows.services import workflow_set_paused

from . import state
from .dispatch import dispatch_many_on_commit, dispatch_on_commit
from .inbox import interests_render
from .models import ApiKey, ApiKeyScope, TriggerInstance, TriggerStatus
from .selectors import instance_by_key

logger = logging.getLogger("notifyflow.triggers")

MAX_IDEMPOTENCY_KEY_LENGTH = 255
MAX_BULK_ITEMS = 1000


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


def _resolve_workflow(workflow: Workflow | str) -> Workflow:
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
    wf = _resolve_workflow(workflow)
    try:
        row = _new_row(wf, idempotency_key, payload, created_by_key=created_by_key)
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
    dispatch_on_commit(row.id)
    instance = state.as_model(row, now)
    instance._state.adding, instance._state.db = False, connection.alias
    instance.workflow = wf
    instance.workflow_version = _startable_version(wf)  # the version _new_row started it on
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
        raise _idempotency_conflict()
    metrics.TRIGGERS.labels("replayed").inc()
    return TriggerCreateResult(existing, False)


def _idempotency_conflict() -> ConflictError:
    return ConflictError(
        code="idempotency_conflict",
        field="idempotency_key",
        message="idempotency_key: already used by an instance this API key may not read; "
        "use another key",
    )


@dataclass(frozen=True)
class TriggerItem:
    """One trigger of a bulk request, validated at the edge as the single POST's body."""

    workflow: str
    idempotency_key: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class BulkOutcome:
    """What became of one item: ``created`` / ``duplicate`` (``instance_id`` set) or
    ``invalid`` (``error`` set, as the single POST would have raised it)."""

    status: Literal["created", "duplicate", "invalid"]
    instance_id: uuid.UUID | None = None
    error: ApplicationError | None = None


def trigger_create_bulk(
    *,
    items: Sequence[TriggerItem | ApplicationError],
    actor: str = "api",
    api_key: ApiKey | None = None,
) -> list[BulkOutcome]:
    """``trigger_create`` for many items at once, one outcome per item, in order.

    Each item has the single call's semantics, as if the items were posted one after
    the other: a replay of an existing (workflow, key) - or of an earlier item of the
    same request - is a ``duplicate`` answered before the workflow's state is checked;
    an unknown, inactive or empty workflow or an interest that does not render makes
    that item ``invalid`` and nothing else; so does a replay of an instance ``api_key``
    may not read (``idempotency_conflict``, no id). An ``ApplicationError`` in ``items``
    is an item the edge already refused; it is passed through as ``invalid``.

    The new instances, their audit rows and interests are one INSERT ... ON CONFLICT
    statement (PostgreSQL); a concurrent writer that took a key first makes that item a
    duplicate of its row. All first steps are published after commit in one pipeline.
    """
    created_by_key = api_key.name if api_key is not None else ""
    if len(items) > MAX_BULK_ITEMS:
        raise ApplicationError(
            code="too_many_items",
            field="items",
            message=f"items: at most {MAX_BULK_ITEMS} items per request",
        )
    outcomes: list[BulkOutcome | None] = [None] * len(items)
    # (index, workflow, item) of the items still to decide, in order.
    pending: list[tuple[int, Workflow, TriggerItem]] = []
    for index, item in enumerate(items):
        if isinstance(item, ApplicationError):
            outcomes[index] = BulkOutcome("invalid", error=item)
            continue
        if not item.idempotency_key:
            outcomes[index] = BulkOutcome(
                "invalid",
                error=ApplicationError(
                    code="required",
                    field="idempotency_key",
                    message="idempotency_key: must be a non-empty string",
                ),
            )
            continue
        try:
            pending.append((index, _resolve_workflow(item.workflow), item))
        except ApplicationError as exc:
            outcomes[index] = BulkOutcome("invalid", error=exc)
    existing = _existing_ids({(wf.pk, item.idempotency_key) for _, wf, item in pending})
    # (workflow id, key) -> the row this request creates for it (its first valid item).
    chosen: dict[tuple[int, str], state.NewInstance] = {}
    new: list[tuple[int, state.NewInstance]] = []
    duplicates_of_new: list[tuple[int, tuple[int, str]]] = []
    for index, wf, item in pending:
        pair = (wf.pk, item.idempotency_key)
        if pair in existing:
            outcomes[index] = _replay_outcome(existing[pair], wf.key, api_key)
            continue
        if pair in chosen:
            duplicates_of_new.append((index, pair))
            continue
        try:
            row = _new_row(wf, item.idempotency_key, item.payload, created_by_key=created_by_key)
        except ApplicationError as exc:
            outcomes[index] = BulkOutcome("invalid", error=exc)
            continue
        chosen[pair] = row
        new.append((index, row))
    inserted = state.create_bulk(rows=[row for _, row in new], now=timezone.now(), actor=actor)
    lost = {(row.workflow_id, row.idempotency_key) for _, row in new if row.id not in inserted}
    # Keys a concurrent request took first: its row is committed (ON CONFLICT waited).
    winners = _existing_ids(lost) if lost else {}
    workflow_keys = {wf.pk: wf.key for _, wf, _ in pending}
    for index, row in new:
        if row.id in inserted:
            outcomes[index] = BulkOutcome("created", instance_id=row.id)
        else:
            winner = winners.get((row.workflow_id, row.idempotency_key))
            outcomes[index] = _replay_outcome(winner, workflow_keys[row.workflow_id], api_key)
    for index, pair in duplicates_of_new:
        row = chosen[pair]
        mine = _Existing(row.id, created_by_key) if row.id in inserted else None
        outcomes[index] = _replay_outcome(
            mine or winners.get(pair), workflow_keys[row.workflow_id], api_key
        )
    if inserted:
        dispatch_many_on_commit(row.id for _, row in new if row.id in inserted)
    done = [outcome for outcome in outcomes if outcome is not None]
    assert len(done) == len(items)
    counts = {"created": 0, "duplicate": 0, "invalid": 0}
    for outcome in done:
        counts[outcome.status] += 1
    metrics.TRIGGERS.labels("created").inc(counts["created"])
    metrics.TRIGGERS.labels("replayed").inc(counts["duplicate"])
    logger.info(
        "triggers created in bulk",
        extra={"nf": {"actor": actor, **counts}},
    )
    return done


def _replay_outcome(
    existing: _Existing | None, workflow_key: str, api_key: ApiKey | None
) -> BulkOutcome:
    """A bulk item whose key has an instance: ``duplicate`` with its id, or - as the
    single POST - ``idempotency_conflict`` if ``api_key`` may not read it."""
    if existing is not None:
        if api_key is not None and not api_key.may_read(
            workflow_key=workflow_key, created_by_key=existing.created_by_key
        ):
            return BulkOutcome("invalid", error=_idempotency_conflict())
        return BulkOutcome("duplicate", instance_id=existing.id)
    # Only if the row that blocked the INSERT vanished again (deleted in between).
    return BulkOutcome(
        "invalid",
        error=ConflictError(
            code="busy", field=None, message="another request changed this key; try again"
        ),
    )


def _new_row(
    wf: Workflow, idempotency_key: str, payload: dict[str, Any], *, created_by_key: str = ""
) -> state.NewInstance:
    """The new instance ``trigger_create`` inserts for ``idempotency_key``, with its
    rendered interests. Raises ApplicationError for an inactive or empty workflow or an
    interest that does not render."""
    version = _startable_version(wf)
    instance_id = uuid7()  # time-ordered: see notifyflow.ids
    return state.NewInstance(
        id=instance_id,
        workflow_id=wf.pk,
        workflow_version_id=version.pk,
        idempotency_key=idempotency_key,
        payload=payload,
        entry_node_id=version.definition["entry_node_id"],
        created_by_key=created_by_key,
        interests=interests_render(
            templates=version.definition.get("interests", ()),
            payload=payload,
            trigger={"id": str(instance_id), "idempotency_key": idempotency_key},
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


class _Existing(NamedTuple):
    id: uuid.UUID
    created_by_key: str


def _existing_ids(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], _Existing]:
    """(workflow id, key) -> the instance (id, creating key) of those that exist: one
    indexed query per workflow (``idempotency_key IN (...)``, chunked)."""
    by_workflow: dict[int, list[str]] = {}
    for workflow_id, key in pairs:
        by_workflow.setdefault(workflow_id, []).append(key)
    found: dict[tuple[int, str], _Existing] = {}
    for workflow_id, keys in by_workflow.items():
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            rows = (
                TriggerInstance.objects.order_by()
                .filter(
                    workflow_id=workflow_id,
                    idempotency_key__in=keys[start : start + _KEYS_PER_QUERY],
                )
                .values_list("idempotency_key", "id", "created_by_key")
            )
            found.update({(workflow_id, key): _Existing(id, by) for key, id, by in rows})
    return found


_KEYS_PER_QUERY = 500  # SQLite's parameter limit


def _existing(workflow: Workflow | str, idempotency_key: str) -> TriggerInstance | None:
    """The instance for (workflow, key) via the unique index; no ORDER BY (the model's
    default ordering would let the planner walk the created_at index instead)."""
    queryset = TriggerInstance.objects.select_related("workflow", "workflow_version").order_by()
    if isinstance(workflow, Workflow):
        queryset = queryset.filter(workflow=workflow, idempotency_key=idempotency_key)
    else:
        queryset = queryset.filter(workflow__key=workflow, idempotency_key=idempotency_key)
    return next(iter(queryset[:1]), None)


# --- operator actions (admin, API): the operator is the audited actor ------------------


def instance_retry(*, instance_id: uuid.UUID | str, actor: str) -> bool:
    """failed -> enqueued now, attempts reset. False if the instance is not failed."""
    return state.retry(instance_id=instance_id, actor=actor)


def instance_retry_on_latest_version(*, instance_id: uuid.UUID | str, actor: str) -> int:
    """Retry a failed instance on its workflow's current version (the fix for a render
    error is usually a new version): the new version is pinned and the audit row names
    both. Returns the version number now pinned.

    Raises NotFoundError; ConflictError ``not_failed``, ``no_newer_version`` (already on
    the current one: a plain retry does that) or ``node_not_in_version`` (the node the
    instance stopped at is not in the new version)."""
    instance = _instance_or_404(instance_id)
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
    instance = _instance_or_404(instance_id)
    _require_failed(instance)
    moved = state.retry(
        instance_id=instance.pk,
        actor=actor,
        reason="payload edited and retried by operator",
        payload=payload,
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


def instance_run_now(*, instance_id: uuid.UUID | str, actor: str, reason: str = "") -> bool:
    """Run a waiting enqueued instance now: skip its delay or retry backoff, or end its
    wait as timed out (``state.run_now``). The caller's ``reason`` goes into the
    audit row. False if it is not waiting."""
    return state.run_now(instance_id=instance_id, actor=actor, reason=reason)


def instance_retry_or_conflict(*, instance_id: uuid.UUID | str, actor: str) -> TriggerInstance:
    """``instance_retry`` for callers that must say why nothing happened (the API).

    Returns the instance as it is after the retry. Raises NotFoundError, or
    ConflictError ``not_failed`` naming the current status.
    """
    instance = _instance_or_404(instance_id)
    if not instance_retry(instance_id=instance.pk, actor=actor):
        instance = _instance_or_404(instance.pk)  # purged meanwhile: 404
        raise ConflictError(
            code="not_failed",
            field=None,
            message=f"instance {instance.pk} is {instance.status}; only a failed instance "
            "can be retried",
        )
    instance.refresh_from_db()
    return instance


def instance_run_now_or_conflict(
    *, instance_id: uuid.UUID | str, actor: str, reason: str = ""
) -> TriggerInstance:
    """``instance_run_now`` for callers that must say why nothing happened (the API).

    Returns the instance, now due. Raises NotFoundError, or ConflictError
    ``not_waiting`` naming the current status (finished, running, or already due).
    """
    instance = _instance_or_404(instance_id)
    if not instance_run_now(instance_id=instance.pk, actor=actor, reason=reason):
        instance = _instance_or_404(instance.pk)  # purged meanwhile: 404
        why = "already due" if instance.status == TriggerStatus.ENQUEUED else instance.status
        raise ConflictError(
            code="not_waiting",
            field=None,
            message=f"instance {instance.pk} is {why}; only an enqueued instance waiting "
            "on a delay, a wait or a retry can run now",
        )
    instance.refresh_from_db()
    return instance


def instance_cancel(
    *, instance_id: uuid.UUID | str, actor: str, reason: str = ""
) -> TriggerInstance:
    """Cancel an unfinished instance: its pending delay, retry or wait never runs; a step
    running now finishes and records its delivery but does not advance. The caller's
    ``reason`` goes into the audit row. Raises NotFoundError, or ConflictError
    ``already_finished`` (naming the status) for a finished instance."""
    for _ in range(3):  # the status may move between the read and the fenced write
        instance = _instance_or_404(instance_id)
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


def instance_cancel_by_key(
    *, workflow: str, idempotency_key: str, actor: str, reason: str = ""
) -> TriggerInstance:
    """``instance_cancel`` for the instance of (workflow key, idempotency key)."""
    found = _existing(workflow, idempotency_key)
    if found is None:
        raise NotFoundError(
            code="not_found",
            field="idempotency_key",
            message=f"idempotency_key: no instance of workflow {workflow!r} with this key",
        )
    return instance_cancel(instance_id=found.pk, actor=actor, reason=reason)


def _instance_or_404(instance_id: uuid.UUID | str) -> TriggerInstance:
    instance = (
        TriggerInstance.objects.select_related("workflow", "workflow_version")
        .filter(pk=instance_id)
        .first()
    )
    if instance is None:
        raise NotFoundError(code="not_found", field=None, message="no such trigger instance")
    return instance


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
            ).values_list("id", flat=True)[:batch]
        )
        TriggerInstance.objects.filter(pk__in=due).update(dispatched_at=now)
        for instance_id in due:
            dispatch_on_commit(instance_id)
    logger.warning(
        "workflow %s resumed by %s; %d due instances dispatched", workflow.key, actor, len(due)
    )
    return workflow


# --- API keys ------------------------------------------------------------------------


def api_key_create(
    *,
    name: str,
    scope: str = ApiKeyScope.ADMIN,
    workflows: Sequence[str] = (),
    rate: str = "",
) -> tuple[ApiKey, str]:
    """Create an API key of ``scope`` (limited to ``workflows`` when given, throttled at
    ``rate`` when given: "50/s"); return the row and the raw key (shown once, never
    stored). ``ApplicationError`` names the invalid field."""
    rate = validate_rate(rate)
    if not name or not name.strip():
        raise ApplicationError(field="name", code="required", message="name: required")
    if scope not in ApiKeyScope.values:
        raise ApplicationError(
            field="scope",
            code="invalid_choice",
            message=f"scope: must be one of {', '.join(ApiKeyScope.values)}",
        )
    raw = "nf_" + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        name=name.strip(),
        prefix=raw[:10],
        key_hash=ApiKey.hash_key(raw),
        scope=scope,
        workflows=sorted(set(workflows)),
        rate=rate,
    )
    return key, raw


def api_key_reuse_or_create(*, raw: str | None, name: str) -> tuple[ApiKey, str, bool]:
    """The active key whose raw value is ``raw``, else a new admin key named ``name``;
    returns the row, the raw key and whether it was created. For a key kept outside the
    database (``make run``'s env file): reused while it works, replaced once revoked."""
    if raw:
        existing = ApiKey.objects.filter(
            key_hash=ApiKey.hash_key(raw), revoked_at__isnull=True
        ).first()
        if existing is not None:
            return existing, raw, False
    key, raw = api_key_create(name=name)
    return key, raw, True


def api_key_set_rate(*, api_key: ApiKey, rate: str) -> ApiKey:
    """Throttle ``api_key`` at ``rate`` ("50/s"; empty: NOTIFYFLOW_THROTTLE_RATE, off by
    default). Processes that cached the key apply it within the cache's 10 s.
    ``ApplicationError`` (field ``rate``) for a malformed rate."""
    api_key.rate = validate_rate(rate)
    ApiKey.objects.filter(pk=api_key.pk).update(rate=api_key.rate)
    return api_key


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
