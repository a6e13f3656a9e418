"""Events and workflow-trigger bindings: the business logic behind POST /api/v1/events/,
the workflow-trigger API and its admin. Every instance is created by
``triggers.services.trigger_create``; this module only decides the idempotency key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from api_keys.models import ApiKey
from notifyflow import metrics
from notifyflow.errors import ApplicationError, ConflictError
from workflows.models import Workflow

from .idempotency import (
    IdempotencySettings,
    KeyGenerationError,
    SettingsError,
    generator_for,
    resolve_settings,
)
from .inbox import deliver
from .models import EventRecord, WorkflowTrigger
from .services import RecipientEntry, trigger_create, trigger_create_for_recipients

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
    # A binding of an event whose context names ``recipients``: one entry per recipient
    # ({recipient, id, status}) and its lists' fan-out ({id, status, expected}).
    instances: list[dict[str, Any]] | None = None
    fanout: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("instances", "fanout"):
            if data[name] is None:
                del data[name]
        return data


@dataclass(frozen=True)
class EventResult:
    record: EventRecord
    outcomes: list[BindingOutcome]
    #: Running instances the event was delivered to (through their interests).
    delivered: list[uuid.UUID] = field(default_factory=list)


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


def _canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


# --- key generation -------------------------------------------------------------------


def binding_key_generate(
    *, binding: WorkflowTrigger, event_id: str | None, context: dict[str, Any], at: datetime
) -> GeneratedKey:
    """The idempotency key ``binding`` gives this event. An invalid stored setting runs
    as UUID (logged). Raises KeyGenerationError when the binding must be skipped."""
    resolved = resolve_settings(binding.idempotency_setting, label=f"workflow trigger {binding.pk}")
    key = generator_for(resolved.settings).generate(
        trigger_id=binding.pk,
        event_name=binding.event_name,
        event_id=event_id,
        context=context,
        at=at,
    )
    return GeneratedKey(key, resolved.settings, resolved.fallback_reason)


def idempotency_key_preview(
    *,
    binding: WorkflowTrigger,
    context: dict[str, Any],
    event_id: str | None = None,
    at: datetime | None = None,
) -> KeyPreview:
    """The key ``binding`` would generate for this event (nothing is written).

    Raises ApplicationError naming the reason the binding would be skipped
    (``context.userId`` missing, expression error, missing event_id)."""
    instant = at or timezone.now()
    try:
        generated = binding_key_generate(
            binding=binding, event_id=event_id, context=context, at=instant
        )
    except KeyGenerationError as exc:
        raise ApplicationError(
            field=exc.field or "context", code=exc.code, message=exc.message
        ) from exc
    notes = []
    if generated.fallback_reason:
        notes.append(generated.fallback_reason)
    if generated.settings.is_random:
        notes.append(
            f"{generated.settings.strategy} generates a new random key for every "
            "event, so events are never deduplicated"
        )
    return KeyPreview(
        generated.key,
        generated.settings.strategy.value,
        generated.settings.is_random,
        "; ".join(notes) or None,
    )


# --- events ---------------------------------------------------------------------------


def _binding_run(
    binding: WorkflowTrigger,
    *,
    event_id: str | None,
    context: dict[str, Any],
    at: datetime,
    actor: str,
    api_key: ApiKey | None,
    recipients: Sequence[RecipientEntry] | None = None,
) -> BindingOutcome:
    workflow_key = binding.workflow.key

    def skipped(code: str, reason: str, key: str | None = None) -> BindingOutcome:
        return BindingOutcome(
            binding.pk, workflow_key, OutcomeStatus.SKIPPED, None, key, reason, code
        )

    try:
        generated = binding_key_generate(binding=binding, event_id=event_id, context=context, at=at)
    except KeyGenerationError as exc:
        log = logger.error if exc.code == "expression_error" else logger.warning
        log(
            "event %s: workflow trigger %s skipped: %s", binding.event_name, binding.pk, exc.message
        )
        return skipped(exc.code, exc.message)
    try:
        # Each binding in its own transaction (a savepoint under an outer one), so one
        # failing binding leaves the others' instances in place.
        with transaction.atomic():
            if recipients is not None:
                return _binding_people(binding, generated, context, recipients, actor, api_key)
            result = trigger_create(
                workflow=binding.workflow,
                idempotency_key=generated.key,
                payload=context,
                actor=actor,
                api_key=api_key,
            )
    except ApplicationError as exc:
        logger.warning(
            "event %s: workflow trigger %s skipped: %s", binding.event_name, binding.pk, exc.message
        )
        return skipped(exc.code, exc.message, generated.key)
    except DatabaseError:
        logger.exception("event %s: workflow trigger %s failed", binding.event_name, binding.pk)
        return skipped("database_error", "the instance could not be stored", generated.key)
    instance_id = str(result.instance.pk)
    if result.created:
        return BindingOutcome(
            binding.pk,
            workflow_key,
            OutcomeStatus.CREATED,
            instance_id,
            generated.key,
            generated.fallback_reason,
            "settings_fallback" if generated.fallback_reason else None,
        )
    logger.warning(
        "event %s: duplicate for workflow trigger %s (key %r, instance %s); not executed again",
        binding.event_name,
        binding.pk,
        generated.key,
        instance_id,
    )
    return BindingOutcome(
        binding.pk,
        workflow_key,
        OutcomeStatus.DUPLICATE,
        instance_id,
        generated.key,
        "an instance with this idempotency key exists",
        "duplicate_key",
    )


def _binding_people(
    binding: WorkflowTrigger,
    generated: GeneratedKey,
    context: dict[str, Any],
    recipients: Sequence[RecipientEntry],
    actor: str,
    api_key: ApiKey | None,
) -> BindingOutcome:
    """A binding's trigger for the people the event's context names: created if
    anything was, else duplicate; the per-recipient outcome and fan-out ride along."""
    result = trigger_create_for_recipients(
        workflow=binding.workflow,
        idempotency_key=generated.key,
        payload={name: value for name, value in context.items() if name != "recipients"},
        recipients=recipients,
        actor=actor,
        api_key=api_key,
    )
    fanout = result.fanout
    return BindingOutcome(
        binding.pk,
        binding.workflow.key,
        OutcomeStatus.CREATED if result.created else OutcomeStatus.DUPLICATE,
        None,
        generated.key,
        None if result.created else "every recipient has an instance with this key",
        None if result.created else "duplicate_key",
        instances=[
            {"recipient": i.recipient, "id": str(i.id), "status": i.status}
            for i in result.instances
        ],
        fanout=None
        if fanout is None
        else {"id": str(fanout.pk), "status": fanout.status, "expected": fanout.expected},
    )


def event_receive(
    *,
    name: str,
    context: dict[str, Any],
    event_id: str | None = None,
    subjects: Sequence[str] = (),
    at: datetime | None = None,
    workflows: Sequence[str] | None = None,
    actor: str = "api",
    api_key: ApiKey | None = None,
    recipients: Sequence[RecipientEntry] | None = None,
) -> EventResult:
    """Fan an event out to every active workflow trigger bound to ``name``, and deliver
    it to every running instance interested in one of ``subjects``.

    For each binding: generate its idempotency key and call ``trigger_create`` with the
    context as payload. The outcome says created, duplicate or skipped (with a reason);
    a skipped binding never stops the others. The event and all outcomes are recorded
    in EventRecord. Delivery (``triggers.inbox.deliver``) comes after the bindings, so
    an instance a binding just created hears the event too when it is interested.
    ``workflows``, when given, limits the bindings to those workflow keys (a key limited
    to workflows); ``actor`` and ``api_key`` are recorded on created instances.
    ``recipients`` (the context's ``recipients``, validated by the caller): each binding
    triggers those people, as POST /triggers/ with ``recipients`` does, with the rest of
    the context as payload.

    A binding whose key has an instance ``api_key`` may not read is ``skipped`` with
    code ``idempotency_conflict`` and no instance id (as ``trigger_create`` refuses
    it); ``delivered`` lists every instance the event reached, the caller shows only
    those its key may read.
    """
    metrics.EVENTS_RECEIVED.inc()
    at = at or timezone.now()
    bindings = (
        WorkflowTrigger.objects.filter(event_name=name, is_active=True)
        .select_related("workflow__current_version")
        .order_by("id")
    )
    if workflows is not None:
        bindings = bindings.filter(workflow__key__in=workflows)
    # Bounded fan-out, whatever was stored before the cap (oldest bindings first).
    bindings = bindings[: settings.NOTIFYFLOW_MAX_BINDINGS_PER_EVENT]
    outcomes = [
        _binding_run(
            b,
            event_id=event_id,
            context=context,
            at=at,
            actor=actor,
            api_key=api_key,
            recipients=recipients,
        )
        for b in bindings
    ]
    record = EventRecord.objects.create(
        name=name,
        event_id=event_id,
        context_sha256=hashlib.sha256(_canonical_json(context)).hexdigest(),
        outcomes=[o.as_json() for o in outcomes],
        received_at=at,
    )
    delivered: list[uuid.UUID] = []
    if subjects:
        with transaction.atomic():
            delivered = deliver(
                name=name, event_id=event_id, context=context, subjects=subjects, received_at=at
            ).instance_ids
    return EventResult(record, outcomes, delivered)


# --- bindings -------------------------------------------------------------------------


def _workflow_lookup(workflow: Workflow | str) -> Workflow:
    if isinstance(workflow, Workflow):
        return workflow
    found = Workflow.objects.filter(key=workflow).first()
    if found is None:
        raise ApplicationError(
            field="workflow",
            code="unknown_workflow",
            message=f"workflow: no workflow with key {workflow!r}",
        )
    return found


def idempotency_setting_validate(raw: Any) -> dict[str, Any]:
    """The normalized setting to store, or ApplicationError naming the option
    (``idempotency_setting.ttlMinutes``)."""
    try:
        return IdempotencySettings.parse(raw).to_json()
    except SettingsError as exc:
        field = f"idempotency_setting.{exc.field}" if exc.field else "idempotency_setting"
        raise ApplicationError(
            field=field, code=exc.code, message=f"{field}: {exc.message}"
        ) from exc


def workflow_trigger_save(
    *,
    event_name: str,
    workflow: Workflow | str,
    is_active: bool = True,
    idempotency_setting: Any = None,
    binding: WorkflowTrigger | None = None,
) -> WorkflowTrigger:
    """Create (``binding`` None) or fully replace a workflow trigger.

    ``workflow`` is a Workflow or its key; ``idempotency_setting`` None means UUID.
    Raises ApplicationError naming the field (``workflow``,
    ``idempotency_setting.<option>``)."""
    setting = idempotency_setting_validate(idempotency_setting)
    wf = _workflow_lookup(workflow)
    most = settings.NOTIFYFLOW_MAX_BINDINGS_PER_EVENT
    others = WorkflowTrigger.objects.filter(event_name=event_name)
    if binding is not None:
        others = others.exclude(pk=binding.pk)
    if others.count() >= most:
        # The request is valid; the event's other bindings are what refuse it.
        raise ConflictError(
            field="event_name",
            code="too_many_bindings",
            message=f"event_name: {event_name!r} already has {most} bindings (the limit)",
        )
    if binding is None:
        binding = WorkflowTrigger(
            event_name=event_name, workflow=wf, is_active=is_active, idempotency_setting=setting
        )
    else:
        binding.event_name, binding.workflow = event_name, wf
        binding.is_active, binding.idempotency_setting = is_active, setting
    binding.save()
    return binding


def workflow_trigger_delete(*, binding: WorkflowTrigger) -> None:
    """Delete a binding. Instances it created stay (they belong to the workflow)."""
    binding.delete()
