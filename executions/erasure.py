"""Erasing a person (``DELETE /recipients/{id}/``, SPEC §12), in one transaction:

1. the recipient's unfinished instances are cancelled (reason ``recipient erased``)
   through the one cancel service;
2. its addresses (email, phone; and any string that is exactly its id) become
   ``[erased]`` wherever the history of its
   instances - and of any instance with a delivery to those addresses - holds them:
   deliveries (address, output, attempts' errors, provider events), step logs,
   status changes, inbox and outbox events, and the instances' payload, vars and
   last error. The history tables refuse UPDATE (PostgreSQL triggers) unless the
   transaction set ``notifyflow.erasure = on`` (executions migration 0011);
3. its instances are marked ``recipient_erased`` (they keep their history, without
   the person);
4. its in-app feed goes (items and counter: ``executions.feed.feed_erase``), then the
   recipient, and with it its preferences, list memberships and opt-out audit rows
   (they name the person; the opt-out no longer matters once nothing can be sent to
   them).

Status webhook messages (SPEC §15) are scrubbed, not deleted: those of the same
instances (the cancellations of step 1 included) and the person's own events
(``recipient.unsubscribed``, ``batch.closed``) keep their type, ids and sequence - the
customer still learns what happened, in order - but their data no longer names the
person, and what their receiver answered (response excerpts) is replaced by
``[erased]`` whole. Pending ones go out scrubbed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import models, transaction
from django.db.models import Q

from notifyflow import db
from notifyflow.errors import ConflictError
from recipients.models import Recipient
from recipients.services import recipient_or_404
from status_webhooks.models import WebhookAttempt, WebhookMessage
from triggers.inbox_models import InboxEvent, OutboxEvent
from triggers.models import TERMINAL_STATUSES, TriggerInstance, TriggerStatusChange
from triggers.services import instance_cancel

from .feed import feed_erase
from .models import (
    Delivery,
    DeliveryAttempt,
    DeliveryEvent,
    StepExecutionLog,
    instance_ids_sent_to,
)

logger = logging.getLogger("notifyflow.executions")

ERASED = "[erased]"
CANCEL_REASON = "recipient erased"
# What is scrubbed, per model: (model, the field that leads to the instance, fields).
_HISTORY: list[tuple[type[models.Model], str, tuple[str, ...]]] = [
    (TriggerInstance, "pk", ("payload", "vars", "last_error")),
    (StepExecutionLog, "trigger_id", ("input_context", "output", "error")),
    (TriggerStatusChange, "instance_id", ("reason", "details")),
    (Delivery, "instance_id", ("recipient", "output")),
    (DeliveryAttempt, "delivery__instance_id", ("error",)),
    (DeliveryEvent, "delivery__instance_id", ("raw",)),
    (InboxEvent, "instance_id", ("context",)),
    (OutboxEvent, "instance_id", ("subjects", "context")),
    (WebhookMessage, "instance_id", ("data",)),
]


@dataclass(frozen=True)
class Erasure:
    """What an erasure did."""

    recipient_id: str
    instances: int
    cancelled: int
    rows_scrubbed: int


@dataclass(frozen=True)
class _Person:
    # The addresses, found anywhere in a string (any case).
    addresses: re.Pattern[str]
    # The recipient's id, replaced where a whole string is it (a template's
    # {"$ref": "recipient", "id": ...}, a payload's user id): a short id such as "7"
    # must not erase every "7" of the history.
    recipient_id: str

    def scrubbed(self, value: Any) -> Any:
        """``value`` (text or JSON) with the person's addresses replaced by ERASED in
        every string (keys included), and every string that is their id by ERASED."""
        if isinstance(value, str):
            return ERASED if value == self.recipient_id else self.addresses.sub(ERASED, value)
        if isinstance(value, list):
            return [self.scrubbed(item) for item in value]
        if isinstance(value, dict):
            return {self.scrubbed(k): self.scrubbed(v) for k, v in value.items()}
        return value


def _address_pattern(recipient: Recipient) -> re.Pattern[str] | None:
    addresses = sorted({a for a in (recipient.email, recipient.phone) if a}, key=len, reverse=True)
    if not addresses:
        return None
    return re.compile("|".join(re.escape(address) for address in addresses), re.IGNORECASE)


def _scrub_history(instance_ids: Iterable[Any], person: _Person) -> int:
    ids = list(instance_ids)
    changed_rows = 0
    for model, lookup, fields in _HISTORY:
        rows = model._default_manager.filter(**{f"{lookup}__in": ids})
        changed_rows += _scrub_rows(model, rows, fields, person)
    # The person's events about no instance (``recipient.unsubscribed``, a batch's
    # ``batch.closed``). Unindexed, a scan of the messages without an instance:
    # erasure is rare.
    own = list(
        WebhookMessage.objects.filter(
            instance_id__isnull=True, data__recipient=person.recipient_id
        ).values_list("pk", flat=True)
    )
    messages = WebhookMessage.objects.filter(pk__in=own)
    changed_rows += _scrub_rows(WebhookMessage, messages, ("data",), person)
    # What the receivers answered to all those messages is the customer's text: it may
    # quote the person in any form, so it goes whole.
    answers = WebhookAttempt.objects.filter(
        Q(message__instance_id__in=ids) | Q(message_id__in=own)
    ).exclude(response_excerpt__in=("", ERASED))
    changed_rows += answers.update(response_excerpt=ERASED)
    return changed_rows


def _scrub_rows(
    model: type[models.Model], rows: models.QuerySet[Any], fields: tuple[str, ...], person: _Person
) -> int:
    changed = []
    for row in rows.only("pk", *fields):
        before = [getattr(row, name) for name in fields]
        after = [person.scrubbed(value) for value in before]
        if after != before:
            for name, value in zip(fields, after, strict=True):
                setattr(row, name, value)
            changed.append(row)
    if changed:
        # bulk_update: an UPDATE, not save() (the history models refuse save()).
        model._default_manager.bulk_update(changed, list(fields), batch_size=500)
    return len(changed)


def recipient_erase(*, recipient_id: str, actor: str) -> Erasure:
    """Erase the recipient ``recipient_id`` (NotFoundError if unknown) as the module
    says, in one transaction: either all of it happens or nothing does."""
    with transaction.atomic():
        recipient = recipient_or_404(recipient_id, for_update=True)
        own = TriggerInstance.objects.filter(recipient=recipient).order_by()
        cancelled = 0
        for instance_id in own.exclude(status__in=TERMINAL_STATUSES).values_list("pk", flat=True):
            try:
                instance_cancel(instance_id=instance_id, actor=actor, reason=CANCEL_REASON)
                cancelled += 1
            except ConflictError:  # finished meanwhile: nothing left to cancel
                pass
        instance_ids = set(own.values_list("pk", flat=True))
        for address in (recipient.email, recipient.phone):
            if address:
                instance_ids.update(instance_ids_sent_to(address))
        # No address: nothing can match but the id (a pattern that never matches).
        pattern = _address_pattern(recipient) or re.compile(r"(?!)")
        db.set_local("notifyflow.erasure", "on")
        try:
            scrubbed = _scrub_history(instance_ids, _Person(pattern, recipient.pk))
        finally:
            # Off again at once: inside a caller's transaction the setting would
            # otherwise outlive this erasure.
            db.set_local("notifyflow.erasure", "off")
        own.update(recipient_erased=True)
        feed_erase(recipient_id=recipient.pk)
        recipient.delete()
    logger.info(
        "recipient erased",
        extra={"instances": len(instance_ids), "cancelled": cancelled, "actor": actor},
    )
    return Erasure(recipient_id, len(instance_ids), cancelled, scrubbed)
