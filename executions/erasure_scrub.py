"""What erasure rewrites (``executions.erasure``): every place a person's email address
or phone number can be stored, found from their instances - their own and any with a
delivery to their addresses - or by a search of the tables that have no link to an
instance. All of it runs inside the erasure's transaction, with ``notifyflow.erasure``
on (the history tables' UPDATE guard, executions migration 0011).

- the instances' idempotency keys that hold an address (or are the person's id) become
  ``erased:<instance id>``, and so do those of every instance sharing a key that holds
  an address (an exact, indexed match) - those join the instances scrubbed below;
- the history of those instances: strings holding an address have it replaced by
  ``[erased]``, strings that are the person's id become ``[erased]``, and an instance's
  old key becomes its new one wherever its rows quote it (a step log's context, an
  ``instance.*`` event's data);
- interest subjects, inbox event ids (unique per instance: ``erased:<row id>``);
- batches of the person or of those instances whose key holds an address:
  ``erased:<batch id>``; the person's throttle counters (recipient scope) and any
  counter whose key holds an address are deleted;
- the event records (``POST /events/``: their outcomes quote generated keys) and the
  admin's log entries (an instance's name is its key) that hold an address: both are
  searched, a scan of each table (erasure is rare; neither links to an instance);
- the fan-outs that held the person (``triggers.fanout_forget``) or share a scrubbed
  key: their payload and key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from django.contrib.admin.models import LogEntry
from django.db import models
from django.db.models import F, Q

from gates.models import Batch, BatchItem, ThrottleCounter, ThrottleScope
from status_webhooks.models import WebhookAttempt, WebhookMessage
from triggers.models import TriggerInstance, TriggerStatusChange
from triggers.models.events import EventRecord
from triggers.models.fanouts import FanOut
from triggers.models.inbox import InboxEvent, Interest, OutboxEvent

from .models import Delivery, DeliveryAttempt, DeliveryEvent, StepExecutionLog

ERASED = "[erased]"
KEY_PREFIX = "erased:"
# What is scrubbed, per model: (model, the field that leads to the instance, fields).
HISTORY: list[tuple[type[models.Model], str, tuple[str, ...]]] = [
    (TriggerInstance, "pk", ("payload", "vars", "last_error", "concurrency_key")),
    (StepExecutionLog, "trigger_id", ("input_context", "output", "error")),
    (TriggerStatusChange, "instance_id", ("reason", "details")),
    (Delivery, "instance_id", ("recipient", "output", "targets")),
    (DeliveryAttempt, "delivery__instance_id", ("error",)),
    (DeliveryEvent, "delivery__instance_id", ("raw",)),
    (InboxEvent, "instance_id", ("context",)),
    (OutboxEvent, "instance_id", ("event_id", "subjects", "context")),
    (WebhookMessage, "instance_id", ("data",)),
]


def erased_key(pk: Any) -> str:
    """The idempotency key (or batch key) that replaces one holding a person."""
    return f"{KEY_PREFIX}{pk}"


@dataclass(frozen=True)
class Person:
    """What identifies the person in stored text."""

    # Their email address and phone number (either may be missing).
    addresses: tuple[str | None, ...]
    # The recipient's id, replaced where a whole string is it (a template's
    # {"$ref": "recipient", "id": ...}, a payload's user id): a short id such as "7"
    # must not erase every "7" of the history.
    recipient_id: str
    # Per instance id (text): its scrubbed idempotency key, (old, new).
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Any of the addresses, anywhere in a string, in any case (never matches when
        there is none: the id is still scrubbed)."""
        found = sorted({a for a in self.addresses if a}, key=len, reverse=True)
        if not found:
            return re.compile(r"(?!)")
        # Ended where an address ends: jo@x.co is not in jo@x.com, +1555 not in +15550.
        # Its start is open: generated keys glue an address on (trigger_1_email_<addr>).
        ends = r"(?![\w-]|\.[\w-])"
        alternatives = "|".join(re.escape(address) for address in found)
        return re.compile(f"(?:{alternatives}){ends}", re.IGNORECASE)

    def holds_address(self, text: str | None) -> bool:
        """Whether ``text`` holds one of the person's addresses."""
        return bool(text) and bool(self.pattern.search(text or ""))

    def holds(self, text: str | None) -> bool:
        """Whether ``text`` is the person's id or holds one of their addresses."""
        if not text:
            return False
        return text == self.recipient_id or bool(self.pattern.search(text))

    def scrubbed(self, value: Any, instance: Any = None) -> Any:
        """``value`` (text or JSON) with the person's addresses replaced by ERASED in
        every string (keys included), every string that is their id by ERASED, and the
        old idempotency key of ``instance`` (an id) by its new one."""
        if isinstance(value, str):
            key = self.keys.get(str(instance)) if instance is not None else None
            if key is not None and value == key[0]:
                return key[1]
            return ERASED if value == self.recipient_id else self.pattern.sub(ERASED, value)
        if isinstance(value, list):
            return [self.scrubbed(item, instance) for item in value]
        if isinstance(value, dict):
            return {
                self.scrubbed(k, instance): self.scrubbed(v, instance) for k, v in value.items()
            }
        return value


def scrub_keys(instance_ids: Iterable[Any], person: Person) -> set[Any]:
    """Replace the idempotency keys of ``instance_ids`` that hold the person, and those
    of every instance with the same key, by ``erased:<instance id>``; record each in
    ``person.keys``. Returns the ids of the instances sharing such a key that were not
    in ``instance_ids`` (their history holds the old key too)."""
    ids = list(instance_ids)
    rows = TriggerInstance.objects.filter(pk__in=ids).values_list("pk", "idempotency_key")
    personal = {pk: key for pk, key in rows if person.holds(key)}
    extra: set[Any] = set()
    # Other people's instances only where the key holds an address: a key that is just
    # the person's id ("7") is as likely another's order number.
    shared = {key for key in personal.values() if person.holds_address(key)}
    if shared:
        sharing = TriggerInstance.objects.filter(idempotency_key__in=shared)
        for pk, key in sharing.exclude(pk__in=list(personal)).values_list("pk", "idempotency_key"):
            personal[pk] = key
            extra.add(pk)
    changed = []
    for pk, key in personal.items():
        person.keys[str(pk)] = (key, erased_key(pk))
        changed.append(TriggerInstance(pk=pk, idempotency_key=erased_key(pk)))
    TriggerInstance.objects.bulk_update(changed, ["idempotency_key"], batch_size=500)
    return extra


def scrub_history(instance_ids: Iterable[Any], person: Person) -> int:
    """The history of ``instance_ids`` (HISTORY, interests, inbox event ids, webhook
    messages and their receivers' answers) and the person's own events; rows changed."""
    ids = list(instance_ids)
    changed_rows = 0
    for model, lookup, fields in HISTORY:
        rows = model._default_manager.filter(**{f"{lookup}__in": ids})
        changed_rows += scrub_rows(model, rows, fields, person, lookup)
    changed_rows += _scrub_interests(ids, person) + _scrub_inbox_ids(ids, person)
    # The person's events about no instance (``recipient.unsubscribed``, a batch's
    # ``batch.closed``). Unindexed, a scan of the messages without an instance:
    # erasure is rare.
    own = list(
        WebhookMessage.objects.filter(
            instance_id__isnull=True, data__recipient=person.recipient_id
        ).values_list("pk", flat=True)
    )
    messages = WebhookMessage.objects.filter(pk__in=own)
    changed_rows += scrub_rows(WebhookMessage, messages, ("data",), person)
    # What the receivers answered to all those messages is the customer's text: it may
    # quote the person in any form, so it goes whole.
    answers = WebhookAttempt.objects.filter(
        Q(message__instance_id__in=ids) | Q(message_id__in=own)
    ).exclude(response_excerpt__in=("", ERASED))
    changed_rows += answers.update(response_excerpt=ERASED)
    return changed_rows


def scrub_rows(
    model: type[models.Model],
    rows: models.QuerySet[Any],
    fields: tuple[str, ...],
    person: Person,
    lookup: str | None = None,
) -> int:
    """Scrub ``fields`` of ``rows`` (their instance through ``lookup``, for its key)."""
    if lookup is not None:
        rows = rows.annotate(erasure_instance=F(lookup))
    changed = []
    for row in rows.only("pk", *fields):
        instance = getattr(row, "erasure_instance", None)
        before = [getattr(row, name) for name in fields]
        after = [person.scrubbed(value, instance) for value in before]
        if after != before:
            for name, value in zip(fields, after, strict=True):
                setattr(row, name, value)
            changed.append(row)
    if changed:
        # bulk_update: an UPDATE, not save() (the history models refuse save()).
        model._default_manager.bulk_update(changed, list(fields), batch_size=500)
    return len(changed)


def _scrub_interests(ids: list[Any], person: Person) -> int:
    """Subjects are unique per instance: one that scrubs into a subject the instance
    already has is deleted."""
    rows = list(
        Interest.objects.filter(instance_id__in=ids).values_list("pk", "instance_id", "subject")
    )
    taken = {(instance, subject) for _, instance, subject in rows}
    changed = 0
    for pk, instance, subject in rows:
        if not person.holds(subject):
            continue
        new = person.scrubbed(subject)
        if (instance, new) in taken:
            Interest.objects.filter(pk=pk).delete()
        else:
            Interest.objects.filter(pk=pk).update(subject=new)
            taken.add((instance, new))
        changed += 1
    return changed


def _scrub_inbox_ids(ids: list[Any], person: Person) -> int:
    """Inbox event ids are unique per instance: one holding the person becomes
    ``erased:<row id>``."""
    changed = [
        InboxEvent(pk=pk, event_id=erased_key(pk))
        for pk, event_id in InboxEvent.objects.filter(instance_id__in=ids)
        .exclude(event_id__isnull=True)
        .values_list("pk", "event_id")
        if person.holds(event_id)
    ]
    InboxEvent.objects.bulk_update(changed, ["event_id"], batch_size=500)
    return len(changed)


def _holding(person: Person, *fields: str) -> Q:
    """Rows whose ``fields`` hold one of the person's addresses (case-insensitive LIKE:
    a scan)."""
    conditions = [
        Q(**{f"{name}__icontains": address})
        for name in fields
        for address in person.addresses
        if address
    ]
    return reduce(or_, conditions, Q(pk__in=[]))


def scrub_gates(instance_ids: Iterable[Any], person: Person) -> int:
    """Batches (key) and throttle counters (deleted) that hold the person."""
    ids = list(instance_ids)
    batches = Batch.objects.filter(
        Q(recipient_id=person.recipient_id)
        | Q(opener_id__in=ids)
        | Q(pk__in=BatchItem.objects.filter(instance_id__in=ids).values("batch_id"))
    ).values_list("pk", "key")
    changed = [Batch(pk=pk, key=erased_key(pk)) for pk, key in batches if person.holds(key)]
    Batch.objects.bulk_update(changed, ["key"], batch_size=500)
    deleted, _ = ThrottleCounter.objects.filter(
        Q(scope=ThrottleScope.RECIPIENT, subject=person.recipient_id) | _holding(person, "key")
    ).delete()
    return len(changed) + deleted


def scrub_unlinked(person: Person) -> int:
    """The event records and the admin's log entries that hold the person (searched)."""
    records = EventRecord.objects.filter(_holding(person, "outcomes", "event_id"))
    changed = 0
    for record in records.only("pk", "outcomes", "event_id"):
        record.outcomes = [
            person.scrubbed(o, o.get("instance_id") if isinstance(o, dict) else None)
            for o in record.outcomes or []
        ]
        record.event_id = person.scrubbed(record.event_id)
        EventRecord.objects.filter(pk=record.pk).update(
            outcomes=record.outcomes, event_id=record.event_id
        )
        changed += 1
    entries = LogEntry.objects.filter(_holding(person, "object_repr", "change_message"))
    for entry in entries.only("pk", "object_repr", "change_message"):
        LogEntry.objects.filter(pk=entry.pk).update(
            object_repr=person.scrubbed(entry.object_repr)[:200],
            change_message=person.scrubbed(entry.change_message),
        )
        changed += 1
    return changed


def scrub_fanouts(fanout_ids: Iterable[Any], person: Person) -> int:
    """The fan-outs that held the person or share one of their scrubbed keys: payload,
    and a key holding them (``erased:<fan-out id>``)."""
    old_keys = {old for old, _ in person.keys.values()}
    fanouts = FanOut.objects.filter(Q(pk__in=list(fanout_ids)) | Q(idempotency_key__in=old_keys))
    changed = 0
    for fanout in fanouts.only("pk", "payload", "idempotency_key"):
        payload = person.scrubbed(fanout.payload)
        key = erased_key(fanout.pk) if person.holds(fanout.idempotency_key) else None
        if payload != fanout.payload or key is not None:
            FanOut.objects.filter(pk=fanout.pk).update(
                payload=payload, idempotency_key=key or fanout.idempotency_key
            )
            changed += 1
    return changed
