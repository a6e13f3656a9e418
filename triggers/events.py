"""Events and workflow-trigger bindings: the business logic behind POST /api/v1/events/,
the workflow-trigger API and its admin. Every instance is created by
``triggers.services.trigger_create``; this module only decides the idempotency key.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from notifyflow.api_errors import InputError
from workflows.models import Workflow

from .event_models import EventRecord, WorkflowTrigger
from .idempotency import (
    IdempotencySettings,
    KeyGenerationError,
    SettingsError,
    generator_for,
    resolve_settings,
)
from .services import trigger_create

logger = logging.getLogger("notifyflow.events")

MAX_EVENT_NAME_LENGTH = 200
MAX_EVENT_ID_LENGTH = 255


class OutcomeStatus:
    CREATED = "created"
    DUPLICATE = "duplicate"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class BindingOutcome:
    """What one binding did with one event. ``code`` is a stable machine-readable reason
    (``missing_context``, ``expression_error``, ``inactive_workflow``, ...) for skips."""

    binding: int
    workflow: str
    status: str
    instance_id: str | None
    idempotency_key: str | None
    reason: str | None = None
    code: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EventResult:
    record: EventRecord
    outcomes: list[BindingOutcome]


@dataclass(frozen=True)
class GeneratedKey:
    key: str
    settings: IdempotencySettings
    #: Set when the stored setting was invalid and UUID was used instead.
    fallback_reason: str | None = None


@dataclass(frozen=True)
class KeyPreview:
    idempotency_key: str
    strategy: str
    random: bool
    note: str | None


# --- validation shared by events and previews -----------------------------------------

def _validate_event_name(name: Any, field: str = "name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(field=field, code="required",
                         message=f"{field}: must be a non-empty string")
    if len(name) > MAX_EVENT_NAME_LENGTH:
        raise InputError(field=field, code="too_long",
                         message=f"{field}: at most {MAX_EVENT_NAME_LENGTH} characters")
    return name


def _validate_event_id(event_id: Any) -> str | None:
    if event_id is None:
        return None
    if not isinstance(event_id, str) or not event_id.strip():
        raise InputError(field="event_id", code="invalid",
                         message="event_id: must be a non-empty string (or left out)")
    if len(event_id) > MAX_EVENT_ID_LENGTH:
        raise InputError(field="event_id", code="too_long",
                         message=f"event_id: at most {MAX_EVENT_ID_LENGTH} characters")
    return event_id


def _canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode()


def _validate_context(context: Any) -> dict[str, Any]:
    if not isinstance(context, dict):
        raise InputError(field="context", code="not_an_object",
                         message="context: must be a JSON object")
    size = len(_canonical_json(context))
    if size > settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES:
        raise InputError(field="context", code="payload_too_large", status=413,
                         message=f"context: {size} bytes is over the limit of "
                                 f"{settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES} bytes")
    return context


def _validate_at(at: Any) -> datetime:
    if at is None:
        return timezone.now()
    if isinstance(at, datetime):
        parsed: datetime | None = at
    elif isinstance(at, str):
        try:
            parsed = parse_datetime(at.strip())
        except ValueError:
            parsed = None
    else:
        parsed = None
    if parsed is None:
        raise InputError(field="at", code="invalid",
                         message="at: must be an ISO-8601 date-time, e.g. "
                                 "2024-05-01T09:23:00Z")
    # An instant without an offset is taken as UTC (windows are UTC-aligned anyway).
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


# --- key generation -------------------------------------------------------------------

def binding_key_generate(
    *, binding: WorkflowTrigger, event_id: str | None, context: dict[str, Any], at: datetime
) -> GeneratedKey:
    """The idempotency key ``binding`` gives this event. An invalid stored setting runs
    as UUID (logged). Raises KeyGenerationError when the binding must be skipped."""
    resolved = resolve_settings(binding.idempotency_setting,
                                label=f"workflow trigger {binding.pk}")
    key = generator_for(resolved.settings).generate(
        trigger_id=binding.pk, event_name=binding.event_name, event_id=event_id,
        context=context, at=at,
    )
    return GeneratedKey(key, resolved.settings, resolved.fallback_reason)


def idempotency_key_preview(
    *, binding: WorkflowTrigger, context: Any = None, event_id: Any = None, at: Any = None
) -> KeyPreview:
    """The key ``binding`` would generate for this event (nothing is written).

    Raises InputError naming the field: bad input, or the reason the binding would be
    skipped (``context.userId`` missing, expression error, missing event_id)."""
    context = _validate_context({} if context is None else context)
    event_id = _validate_event_id(event_id)
    instant = _validate_at(at)
    try:
        generated = binding_key_generate(binding=binding, event_id=event_id, context=context,
                                         at=instant)
    except KeyGenerationError as exc:
        raise InputError(field=exc.field or "context", code=exc.code,
                         message=exc.message) from exc
    notes = []
    if generated.fallback_reason:
        notes.append(generated.fallback_reason)
    if generated.settings.is_random:
        notes.append(f"{generated.settings.strategy} generates a new random key for every "
                     "event, so events are never deduplicated")
    return KeyPreview(generated.key, generated.settings.strategy.value,
                      generated.settings.is_random, "; ".join(notes) or None)


# --- events ---------------------------------------------------------------------------

def _binding_run(
    binding: WorkflowTrigger, *, event_id: str | None, context: dict[str, Any], at: datetime
) -> BindingOutcome:
    workflow_key = binding.workflow.key

    def skipped(code: str, reason: str, key: str | None = None) -> BindingOutcome:
        return BindingOutcome(binding.pk, workflow_key, OutcomeStatus.SKIPPED, None, key,
                              reason, code)

    try:
        generated = binding_key_generate(binding=binding, event_id=event_id, context=context,
                                         at=at)
    except KeyGenerationError as exc:
        log = logger.error if exc.code == "expression_error" else logger.warning
        log("event %s: workflow trigger %s skipped: %s", binding.event_name, binding.pk,
            exc.message)
        return skipped(exc.code, exc.message)
    try:
        # Each binding in its own transaction (a savepoint under an outer one), so one
        # failing binding leaves the others' instances in place.
        with transaction.atomic():
            result = trigger_create(workflow=binding.workflow, idempotency_key=generated.key,
                                    payload=context)
    except InputError as exc:
        logger.warning("event %s: workflow trigger %s skipped: %s", binding.event_name,
                       binding.pk, exc.message)
        return skipped(exc.code, exc.message, generated.key)
    except DatabaseError:
        logger.exception("event %s: workflow trigger %s failed", binding.event_name,
                         binding.pk)
        return skipped("database_error", "the instance could not be stored", generated.key)
    instance_id = str(result.instance.pk)
    if result.created:
        return BindingOutcome(binding.pk, workflow_key, OutcomeStatus.CREATED, instance_id,
                              generated.key, generated.fallback_reason,
                              "settings_fallback" if generated.fallback_reason else None)
    logger.warning("event %s: duplicate for workflow trigger %s (key %r, instance %s); "
                   "not executed again", binding.event_name, binding.pk, generated.key,
                   instance_id)
    return BindingOutcome(binding.pk, workflow_key, OutcomeStatus.DUPLICATE, instance_id,
                          generated.key, "an instance with this idempotency key exists",
                          "duplicate_key")


def event_receive(
    *, name: Any, context: Any, event_id: Any = None, at: datetime | None = None
) -> EventResult:
    """Fan an event out to every active workflow trigger bound to ``name``.

    For each binding: generate its idempotency key and call ``trigger_create`` with the
    context as payload. The outcome says created, duplicate or skipped (with a reason);
    a skipped binding never stops the others. The event and all outcomes are recorded
    in EventRecord. Raises InputError for invalid input (nothing is recorded then).
    """
    name = _validate_event_name(name)
    event_id = _validate_event_id(event_id)
    context = _validate_context(context)
    at = at or timezone.now()
    bindings = (
        WorkflowTrigger.objects.filter(event_name=name, is_active=True)
        .select_related("workflow__current_version")
        .order_by("id")
    )
    outcomes = [_binding_run(b, event_id=event_id, context=context, at=at) for b in bindings]
    record = EventRecord.objects.create(
        name=name, event_id=event_id,
        context_sha256=hashlib.sha256(_canonical_json(context)).hexdigest(),
        outcomes=[o.as_json() for o in outcomes], received_at=at,
    )
    return EventResult(record, outcomes)


# --- bindings -------------------------------------------------------------------------

def _workflow_lookup(workflow: Any) -> Workflow:
    if isinstance(workflow, Workflow):
        return workflow
    if not isinstance(workflow, str) or not workflow:
        raise InputError(field="workflow", code="required",
                         message="workflow: a workflow key is required")
    found = Workflow.objects.filter(key=workflow).first()
    if found is None:
        raise InputError(field="workflow", code="unknown_workflow",
                         message=f"workflow: no workflow with key {workflow!r}")
    return found


def idempotency_setting_validate(raw: Any) -> dict[str, Any]:
    """The normalized setting to store, or InputError naming the option
    (``idempotency_setting.ttlMinutes``)."""
    try:
        return IdempotencySettings.parse(raw).to_json()
    except SettingsError as exc:
        field = f"idempotency_setting.{exc.field}" if exc.field else "idempotency_setting"
        raise InputError(field=field, code=exc.code,
                         message=f"{field}: {exc.message}") from exc


def workflow_trigger_save(
    *,
    event_name: Any,
    workflow: Any,
    is_active: Any = True,
    idempotency_setting: Any = None,
    binding: WorkflowTrigger | None = None,
) -> WorkflowTrigger:
    """Create (``binding`` None) or fully replace a workflow trigger.

    ``workflow`` is a Workflow or its key; ``idempotency_setting`` None means UUID.
    Raises InputError naming the field (``event_name``, ``workflow``, ``is_active``,
    ``idempotency_setting.<option>``)."""
    event_name = _validate_event_name(event_name, "event_name")
    if not isinstance(is_active, bool):
        raise InputError(field="is_active", code="invalid",
                         message="is_active: must be true or false")
    setting = idempotency_setting_validate(idempotency_setting)
    wf = _workflow_lookup(workflow)
    if binding is None:
        binding = WorkflowTrigger(event_name=event_name, workflow=wf, is_active=is_active,
                                  idempotency_setting=setting)
    else:
        binding.event_name, binding.workflow = event_name, wf
        binding.is_active, binding.idempotency_setting = is_active, setting
    binding.save()
    return binding


def workflow_trigger_delete(*, binding: WorkflowTrigger) -> None:
    """Delete a binding. Instances it created stay (they belong to the workflow)."""
    binding.delete()
