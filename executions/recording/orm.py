"""Recording through Django's ORM (``OrmStepRecorder``: SQLite, ``make run``): the
same rows as ``postgres``, in one transaction."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction

from recipients.models import Recipient
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.inbox import InboxEvent, OutboxEvent
from workflows.models import Workflow

from ..deliveries import record_delivery
from ..models import Delivery, StepExecutionLog
from ..step import Audience, StepRecipient
from ..versions import pinned_version
from .advance import apply_outcome
from .base import RECIPIENT_FIELDS, Claimed, StepRecord, StepRecorder


class OrmStepRecorder(StepRecorder):
    """The claim, then its delivery record, recipient and workflow read apart; the
    outcome's rows in one ORM transaction."""

    def claim(self, *, instance_id: uuid.UUID | str, worker: str, now: datetime) -> Claimed | None:
        instance = state.claim(instance_id=instance_id, worker=worker, now=now)
        if instance is None:
            return None
        delivery = (
            Delivery.objects.filter(instance_id=instance.pk, node_id=instance.current_node_id)
            .values_list("status", "output")
            .first()
        )
        status, output = delivery if delivery else (None, None)
        return Claimed(
            instance,
            pinned_version(instance.workflow_version_id),
            status,
            output,
            _audience(instance),
        )

    def record(self, rec: StepRecord) -> bool:
        with transaction.atomic():
            if rec.step is not None:
                record_delivery(rec.step)
            recorded = apply_outcome(rec)
            if not recorded:
                cancelled = TriggerInstance.objects.filter(
                    pk=rec.instance.pk, status=TriggerStatus.CANCELLED
                ).exists()
                rec.log.update(rec.not_applied(cancelled=cancelled))
            elif rec.result is not None:
                _write_running_instance_rows(rec)
            StepExecutionLog.objects.create(**rec.log)
        return recorded


# The recipient's columns the step reads (templates and the preference check).


def _audience(instance: TriggerInstance) -> Audience:
    """The recipient and the workflow's settings as they read now (not at creation)."""
    person = None
    if instance.recipient_id is not None:
        values = (
            Recipient.objects.filter(pk=instance.recipient_id).values(*RECIPIENT_FIELDS).first()
        )
        if values is not None:
            person = StepRecipient(**values)
    critical, categories, default_locale = Workflow.objects.values_list(
        "critical", "categories", "default_locale"
    ).get(pk=instance.workflow_id)
    return Audience(
        recipient=person,
        critical=critical,
        categories=tuple(categories or ()),
        recipient_erased=instance.recipient_erased,
        default_locale=default_locale,
    )


def _write_running_instance_rows(rec: StepRecord) -> None:
    """A wait's consumed event and an emit's outbox row (written with the transition)."""
    result, node_id = rec.result, rec.instance.current_node_id or ""
    assert result is not None
    if result.consume_inbox_id is not None:
        InboxEvent.objects.filter(pk=result.consume_inbox_id, consumed_at__isnull=True).update(
            consumed_at=rec.finished, consumed_by_node=node_id
        )
    if result.emit is not None:
        OutboxEvent.objects.get_or_create(
            instance_id=rec.instance.pk,
            node_id=node_id,
            defaults={**result.emit, "created_at": rec.finished},
        )
