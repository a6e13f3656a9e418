"""A preview for a chosen recipient (``recipient_id``, docs/api.md): what each node
would do for that person, read-only.

The engine's own checks decide, run on a copy of the step that is not a preview (a
preview step skips them): the one preference rule and the address check
(``audience.check`` / ``audience.preference``), the send window and quiet hours
(``audience.send_window_gate``). The gates are read, never written: a batch node names
the open batch the instance would join (or that it would open one), a throttle node
whether it would pass now from its counter's hits (no slot taken). Push and chat nodes
list the person's devices and connections in their own preview output (their preview
reads ``step.audience``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gates.models import Batch, BatchStatus, ThrottleCounter, ThrottleScope
from gates.throttles import throttle_state, workflow_subject
from notifyflow.errors import NotFoundError
from recipients.models import PushDevice, Recipient
from workflows.durations import parse_duration
from workflows.models import Workflow

from . import audience
from .nodes.batch import closes_at_for
from .nodes.push import shared_timezone
from .recording.base import RECIPIENT_FIELDS
from .step import Audience, NodeResult, StepContext, StepRecipient

# Node type -> the channel its preference rule is asked about.
CHANNELS = {"email": "email", "sms": "sms", "push": "push", "chat": "chat", "in_app": "in_app"}
# Whose send needs an address field of the recipient (else: devices, connections, feed).
ADDRESSED = ("email", "sms")


def preview_audience(*, recipient_id: str, workflow: Workflow) -> Audience:
    """The recipient ``recipient_id`` and ``workflow``'s settings, as a step reads them.
    NotFoundError (field ``recipient_id``) for an unknown recipient."""
    values = Recipient.objects.filter(pk=recipient_id).values(*RECIPIENT_FIELDS).first()
    if values is None:
        raise NotFoundError(
            code="not_found",
            field="recipient_id",
            message=f"recipient_id: no recipient {recipient_id!r}",
        )
    return Audience(
        recipient=StepRecipient(**values),
        critical=workflow.critical,
        categories=tuple(workflow.categories or ()),
    )


def unsubscribe_link(person: Audience, *, workflow_key: str) -> str:
    """The ``unsubscribe_url`` templates would see ("" when none applies)."""
    return audience.link(person, workflow_key=workflow_key) or ""


def recipient_outcome(step: StepContext) -> dict[str, Any] | None:
    """What the node would do for the step's recipient: ``{would_send, skip_reason?,
    rule?, to?, deferred_until?, deferral_reason?}`` for a channel node, ``{gate, ...}`` for
    a batch or throttle node; None for the other types. Writes nothing."""
    if step.node_type in CHANNELS:
        return _channel_outcome(step, CHANNELS[step.node_type])
    if step.node_type == "batch":
        return _batch_outcome(step)
    if step.node_type == "throttle":
        return _throttle_outcome(step)
    return None


def _channel_outcome(step: StepContext, channel: str) -> dict[str, Any]:
    real = dataclasses.replace(step, preview=False)
    to_recipient = not (
        channel == "chat" and (step.config.get("channel") or step.config.get("webhook_url"))
    )
    if not to_recipient:  # a chat node's fixed channel: the person's preferences do not apply
        skip, rule = None, None
    elif channel in ADDRESSED:
        skip, rule = audience.check(real, channel)
    else:
        skip, rule = audience.preference(real, channel)
    if skip is not None:
        return {"would_send": False, **_skip(skip)}
    outcome: dict[str, Any] = {"would_send": True, "rule": rule}
    if channel in ADDRESSED:  # the node's `to`, else the person's address
        outcome["to"] = audience.addresses(real, channel)
    timezone = None
    if channel == "push":
        person = step.audience.recipient
        devices = list(PushDevice.objects.filter(recipient_id=person.id)) if person else []
        if not devices:
            return {"would_send": False, "skip_reason": "missing_channel_data", "rule": rule}
        timezone = shared_timezone(devices)
    gate = audience.send_window_gate(real, channel, timezone=timezone, to_recipient=to_recipient)
    if gate is not None and gate.skip_reason:
        return {"would_send": False, **_skip(gate)}
    if gate is not None:
        outcome["deferred_until"] = gate.output["deferred_until"]
        outcome["deferral_reason"] = gate.output["reason"]
    return outcome


def _skip(result: NodeResult) -> dict[str, Any]:
    return {
        "skip_reason": result.skip_reason,
        **({"rule": result.output["rule"]} if "rule" in result.output else {}),
    }


def _batch_outcome(step: StepContext) -> dict[str, Any]:
    key = step.render_optional("key") or ""
    person = step.audience.recipient
    open_batch = (
        Batch.objects.filter(
            workflow_id=step.instance.workflow_id,
            node_id=step.node_id,
            recipient_id=person.id if person is not None else None,
            key=key,
            status=BatchStatus.OPEN,
        )
        .only("id", "closes_at", "item_count")
        .first()
    )
    if open_batch is None:
        closes = closes_at_for(step)
        return {"gate": "batch", "key": key, "joins": None, "closes_at": closes.isoformat()}
    return {
        "gate": "batch",
        "key": key,
        "joins": str(open_batch.pk),
        "items": open_batch.item_count,
        "closes_at": open_batch.closes_at.isoformat(),
    }


def _throttle_outcome(step: StepContext) -> dict[str, Any]:
    """The node's limit and window over its counter's hits now (``throttle_state``)."""
    config = step.config
    key = step.render("key").strip() if config.get("key") else ""
    scope = config.get("scope") or ThrottleScope.WORKFLOW
    person = step.audience.recipient
    if scope == ThrottleScope.RECIPIENT:
        subject = person.id if person is not None else ""
    else:
        subject = workflow_subject(workflow=step.workflow_key, node=step.node_id)
    limit = int(config["limit"])
    hits = (
        ThrottleCounter.objects.filter(scope=scope, subject=subject, key=key)
        .values_list("hits", flat=True)
        .first()
    )
    window_ms = int(parse_duration(config["window"]).total_seconds() * 1000)
    state = throttle_state(
        ThrottleCounter(hits=hits or [], limit=limit, window_ms=window_ms), now=step.now
    )
    outcome: dict[str, Any] = {
        "gate": "throttle",
        "key": key,
        "count": state.count,
        "limit": limit,
        "would_pass": state.count < limit,
    }
    if state.count >= limit:
        outcome["room_at"] = state.next_room_at.isoformat()
    return outcome
