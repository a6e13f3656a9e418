"""Erasing a person (``DELETE /recipients/{id}/``, docs/api.md#unsubscribe-skips-erasure), in one
transaction, after which no stored row holds their email address or phone number - nor
their push tokens, chat webhook URLs or Slack user id (``channel_data_secrets``: scrubbed
wherever an address is):

1. the list fan-outs forget them (``triggers.fanout_forget``: their snapshots), locked
   before the recipient's row (the order a fan-out's batch takes them in);
2. the recipient's unfinished instances are cancelled (reason ``recipient erased``)
   through the one cancel service;
3. what their instances - and any instance with a delivery to their addresses - hold of
   them is rewritten (``executions.erasure_scrub`` says where and how): idempotency
   keys become ``erased:<instance id>``; addresses (and strings that are their id)
   become ``[erased]`` in the history (deliveries, attempts, provider events, step
   logs, status changes, inbox and outbox events, status webhook messages, the
   instances' payload, vars, last error and concurrency key), interests, batch and
   throttle keys, event records, the admin's log and the fan-outs. The history tables
   refuse UPDATE (PostgreSQL triggers) unless the transaction set
   ``notifyflow.erasure = on`` (executions migration 0011);
4. its instances are marked ``recipient_erased`` (they keep their ids, workflow and
   timeline, without the person);
5. its in-app feed goes (items and counter: ``feed.services.feed_erase``), then the
   recipient, and with it its preferences, list memberships, opt-out audit rows, push
   devices, chat connections and the audit of their removals, and its
   feed-token generation (its feed tokens are refused from then on, and a recipient
   created later under the same id gets a generation of its own).

Status webhook messages are scrubbed, not deleted: those of the same
instances (the cancellations of step 2 included) and the person's own events
(``recipient.unsubscribed``, ``recipient.device_removed``, ``batch.closed``) keep their
type, ids and sequence - the
customer still learns what happened, in order - but their data no longer names the
person, and what their receiver answered (response excerpts) is replaced by
``[erased]`` whole. Pending ones go out scrubbed.

A step running while the erasure commits read the person's addresses before it: its
outcome, written after, cannot advance the cancelled instance (it is fenced on the
lease), and the engine then calls ``scrub_fenced_step``, which scrubs what that step
wrote with the addresses it had read.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from feed.services import feed_erase
from notifyflow import db
from notifyflow.errors import ConflictError
from recipients.channel_data import channel_data_secrets
from recipients.services import recipient_or_404
from triggers.fanout_forget import fanouts_forget_recipient
from triggers.models import TERMINAL_STATUSES, TriggerInstance
from triggers.services import instance_cancel

from .erasure_scrub import (
    ERASED,
    Person,
    erased_key,
    scrub_fanouts,
    scrub_gates,
    scrub_history,
    scrub_keys,
    scrub_unlinked,
)
from .models import instance_ids_sent_to
from .step import StepRecipient

logger = logging.getLogger("notifyflow.executions")

__all__ = ["CANCEL_REASON", "ERASED", "Erasure", "recipient_erase", "scrub_fenced_step"]

CANCEL_REASON = "recipient erased"


@dataclass(frozen=True)
class Erasure:
    """What an erasure did."""

    recipient_id: str
    instances: int
    cancelled: int
    rows_scrubbed: int


def recipient_erase(*, recipient_id: str, actor: str) -> Erasure:
    """Erase the recipient ``recipient_id`` (NotFoundError if unknown) as the module
    says, in one transaction: either all of it happens or nothing does."""
    with transaction.atomic():
        recipient_or_404(recipient_id)
        fanouts = fanouts_forget_recipient(recipient_id=recipient_id)
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
        secrets = channel_data_secrets(recipient_id=recipient.pk)
        person = Person((recipient.email, recipient.phone, *secrets), recipient.pk)
        with _erasing():
            instance_ids |= scrub_keys(instance_ids, person)
            scrubbed = scrub_history(instance_ids, person)
            scrubbed += scrub_gates(instance_ids, person)
            scrubbed += scrub_fanouts(fanouts, person)
            scrubbed += scrub_unlinked(person)
        own.update(recipient_erased=True)
        feed_erase(recipient_id=recipient.pk)
        recipient.delete()
    logger.info(
        "recipient erased",
        extra={"instances": len(instance_ids), "cancelled": cancelled, "actor": actor},
    )
    return Erasure(recipient_id, len(instance_ids), cancelled, scrubbed + len(person.keys))


class _erasing:
    """``notifyflow.erasure`` on for the block (inside a transaction), off again at
    once: inside a caller's transaction the setting would otherwise outlive it."""

    def __enter__(self) -> None:
        db.set_local("notifyflow.erasure", "on")

    def __exit__(self, *exc: object) -> None:
        db.set_local("notifyflow.erasure", "off")


def scrub_fenced_step(
    *,
    instance_id: uuid.UUID,
    idempotency_key: str,
    recipient: StepRecipient | None,
    secrets: Sequence[str] = (),
) -> bool:
    """After a step whose outcome did not apply (``recorded`` False): if its instance's
    recipient was erased while the step ran, scrub what the step wrote - its step log,
    delivery, attempts, events - with the addresses it had read (``recipient``, as its
    claim read it, the channel data it sent to, and the key it saw). False when there
    was nothing to do: no recipient, or not erased (the lease was lost: a sweeper's recovery)."""
    if recipient is None:
        return False
    with transaction.atomic():
        erased = TriggerInstance.objects.filter(pk=instance_id, recipient_erased=True)
        if not erased.exists():
            return False
        person = Person((recipient.email, recipient.phone, *secrets), recipient.id)
        if idempotency_key != erased_key(instance_id) and person.holds(idempotency_key):
            person.keys[str(instance_id)] = (idempotency_key, erased_key(instance_id))
        with _erasing():
            scrub_history([instance_id], person)
    logger.info("step of an erased recipient scrubbed", extra={"instance": str(instance_id)})
    return True
