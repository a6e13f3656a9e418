"""The per-(instance, node) guard around every provider call.

Guarantee: once a send is recorded ``sent``, no retry, redelivered message or recovered
crash sends it again. What stays at-least-once: a worker that dies (or loses its
database connection for longer than the engine retries the outcome: while the lease
holds and before the soft time limit) after the provider accepted the message but
before the step's outcome transaction commits - the ``sent`` record is written in that
transaction. The next attempt (the lease's recovery) sends again, with the same
idempotency key (the email Message-ID header; Twilio's Messages API takes none).

The claim is the mark that a send is under way: the instance is ``processing`` on this
node under one lease, and the delivery row is written once, with the outcome (an
upsert that never overwrites ``sent``; its ``attempts`` is the node's attempt number,
counting a crashed one, restarting after an operator's retry of a failed instance). A
send to several targets (``target_sends``) writes the row ``sending`` with each
accepted target's result while the others' answers are awaited. Not covered, as
before: a worker frozen past its lease and its hard time limit (a paused VM) that
resumes and records ``sent`` while the lease's next attempt is sending - two live
attempts of one node; the claim reads the row once, not again before the provider
call (a read per send for a case the time limits exclude).

Every send holds one of its channel's send slots (``channel_slots``): a hung provider
holds only its channel's share of the worker.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from notifyflow import metrics
from status_webhooks import events as status_events
from status_webhooks.outbox import NewEvent, record

from .channel_slots import channel_slot
from .models import Delivery, DeliveryAttempt, DeliveryStatus, normalize_recipient
from .providers.base import ProviderError
from .providers.failover import collect_attempts

if TYPE_CHECKING:
    from .step import StepContext


def guarded_send(
    *,
    step: StepContext,
    channel: str,
    recipient: str,
    send: Callable[[], dict],
) -> dict[str, Any]:
    """Call ``send`` unless this node's message was already sent; return its output.
    ``recipient`` (the rendered address or number) is recorded, normalized, on the
    delivery row.

    The outcome is not written here: ``step.delivery.pending`` (and every provider call,
    ``step.delivery.attempts``) carries it to the step's outcome transaction
    (``record_delivery``). A preview (``step.preview``) sends and writes nothing.
    """
    if step.preview:
        return {"preview": True, "channel": channel, "message_id": ""}
    if step.delivery.status == DeliveryStatus.SENT:
        return {**(step.delivery.output or {}), "deduplicated": True}
    # A send slot of the channel first (ChannelBusy if none: nothing begun, nothing to
    # record), held until the provider call returns.
    with channel_slot(channel):
        step.delivery.attempt = step.instance.attempts + 1
        step.delivery.channel = channel
        return _send_recorded(step, recipient, send)


def _send_recorded(step: StepContext, recipient: str, send: Callable[[], dict]) -> dict[str, Any]:
    """Call ``send``; its outcome goes to ``step.delivery.pending`` (raising the
    ProviderError it raised)."""
    channel = step.delivery.channel
    row = {
        "channel": channel,
        "recipient": normalize_recipient(recipient),
        "attempts": step.delivery.attempt,
    }
    # No transaction is open here: the provider call never holds a database lock.
    started = time.perf_counter()
    try:
        with collect_attempts() as attempts:
            step.delivery.attempts = attempts
            output = send()
    except ProviderError as exc:
        metrics.PROVIDER_SECONDS.labels(channel, "failed").observe(time.perf_counter() - started)
        step.delivery.pending = {
            **row,
            "status": DeliveryStatus.FAILED,
            "output": {"error": str(exc)},
            "provider_message_id": "",
            **_targets(step),
        }
        raise
    metrics.PROVIDER_SECONDS.labels(channel, "sent").observe(time.perf_counter() - started)
    step.delivery.pending = {
        **row,
        "status": DeliveryStatus.SENT,
        "output": output,
        "provider_message_id": str(output.get("message_id", ""))[:255],
        **_targets(step),
    }
    return output


def _targets(step: StepContext) -> dict[str, Any]:
    """The per-target results of a send to several targets, for its outcome's record."""
    return {} if step.delivery.targets is None else {"targets": step.delivery.targets}


def record_delivery(step: StepContext) -> None:
    """Write the send's outcome and its provider attempts; called inside the step's
    outcome transaction. Written even when the step's own write is fenced out: the
    message *was* sent (and the attempts were made). Never over a ``sent`` row: an
    attempt that finished first stands."""
    if not step.delivery.pending:
        return
    pending = {**step.delivery.pending, "updated_at": timezone.now()}
    rows = Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id)
    found = rows.values_list("id", "status", "attempts").first()
    if found is None:
        delivery = Delivery.objects.create(
            instance_id=step.instance_id, node_id=step.node_id, **pending
        )
        found, updated = (delivery.pk, "", 0), True
    else:
        pending["attempts"] = max(found[2], pending["attempts"])
        updated = found[1] != DeliveryStatus.SENT and bool(
            rows.exclude(status=DeliveryStatus.SENT).update(**pending)
        )
    sent = sent_event(step)
    if updated and sent is not None:
        record(events=[sent])
    DeliveryAttempt.objects.bulk_create(
        [
            DeliveryAttempt(delivery_id=found[0], attempt=step.delivery.attempt, **row)
            for row in step.delivery.attempts
        ]
    )


def sent_event(step: StepContext) -> NewEvent | None:
    """``delivery.sent`` for a send the step records sent (None otherwise), naming the
    provider that took it (the last provider call: failover tries them in order). A send
    to several targets names every provider that accepted one (comma-separated) and
    counts its targets by outcome."""
    if step.delivery.pending.get("status") != DeliveryStatus.SENT:
        return None
    took = [a for a in step.delivery.attempts if a.get("outcome") == "sent"]
    provider = str(took[-1]["provider"]) if took else ""
    counts: dict[str, int] | None = None
    if step.delivery.targets is not None:
        results = step.delivery.targets.values()
        counts = dict(Counter(str(result.get("outcome")) for result in results))
        accepted = {str(r.get("provider")) for r in results if r.get("outcome") == "accepted"}
        provider = ",".join(sorted(accepted))
    return status_events.delivery_status(
        instance_id=step.instance_id,
        workflow_key=step.workflow_key,
        status="sent",
        node_id=step.node_id,
        channel=step.delivery.channel,
        provider=provider,
        message_id=step.delivery.pending.get("provider_message_id", ""),
        targets=counts,
    )
