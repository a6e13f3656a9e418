"""The status events and their data, one builder per type: the producers (the state
machine, a step's record, delivery tracking, opt-outs, a batch's close) build their
events here, so each type has one shape (documented in docs/api.md, "Status events").

No event carries an address or a message's content: a recipient is named by its id,
a delivery by its provider's message id. Instance events get ``instance_id`` and
``sequence`` from the outbox.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .outbox import NewEvent

INSTANCE_STATUSES = ("completed", "failed", "cancelled")
# Tracking statuses reported as ``delivery.<status>``. A provider's own "sent" (or
# "queued") is not: the step reports ``delivery.sent`` when it records the send.
TRACKING_EVENTS = ("delivered", "opened", "clicked", "bounced", "failed", "complained")


def instance_finished(
    *,
    instance_id: uuid.UUID | str,
    workflow_key: str,
    idempotency_key: str,
    recipient_id: str | None,
    status: str,
    reason: str,
) -> NewEvent:
    """``instance.<status>`` for an instance that reached a terminal status."""
    assert status in INSTANCE_STATUSES
    return NewEvent(
        type=f"instance.{status}",
        data={
            "workflow": workflow_key,
            "idempotency_key": idempotency_key,
            "recipient": recipient_id,
            "status": status,
            "reason": reason[:500],
        },
        instance_id=instance_id,
        workflow_key=workflow_key,
    )


def step_skipped(
    *,
    instance_id: uuid.UUID | str,
    workflow_key: str,
    node_id: str,
    node_type: str,
    reason: str,
    rule: str | None = None,
) -> NewEvent:
    """``step.skipped``: a node chose not to send (``reason``: a skip reason; ``rule``:
    the preference setting that decided an opt-out)."""
    data: dict[str, Any] = {"node_id": node_id, "node_type": node_type, "reason": reason}
    if rule:
        data["rule"] = rule
    return NewEvent(
        type="step.skipped", data=data, instance_id=instance_id, workflow_key=workflow_key
    )


def delivery_status(
    *,
    instance_id: uuid.UUID | str,
    workflow_key: str,
    status: str,
    node_id: str,
    channel: str,
    provider: str,
    message_id: str,
    targets: Mapping[str, int] | None = None,
) -> NewEvent:
    """``delivery.<status>``: a send recorded sent, or a provider's report moved the
    delivery's tracking status up. A send to several targets (push devices, chat
    connections) carries ``targets``: how many ended in each outcome (``accepted``,
    ``dead``, ``failed``)."""
    data: dict[str, Any] = {
        "node_id": node_id,
        "channel": channel,
        "provider": provider,
        "message_id": message_id,
        "status": status,
    }
    if targets is not None:
        data["targets"] = dict(targets)
    return NewEvent(
        type=f"delivery.{status}", data=data, instance_id=instance_id, workflow_key=workflow_key
    )


def recipient_unsubscribed(*, recipient_id: str, scope: str, source: str) -> NewEvent:
    """``recipient.unsubscribed``: an opt-out written into the recipient's preferences
    (``scope``: the preference path set false; ``source``: one-click, page, API, ...).
    About a person, not an instance: no sequence, sent to every workflow's endpoints."""
    return NewEvent(
        type="recipient.unsubscribed",
        data={"recipient": recipient_id, "scope": scope, "source": source},
    )


def recipient_resubscribed(*, recipient_id: str, scope: str, source: str) -> NewEvent:
    """``recipient.resubscribed``: a sticky opt-out (the person's own) reversed by an
    explicit write of the same setting to true (``source``: ``api:<key name>``). About
    a person, as ``recipient.unsubscribed``."""
    return NewEvent(
        type="recipient.resubscribed",
        data={"recipient": recipient_id, "scope": scope, "source": source},
    )


def recipient_device_removed(
    *, recipient_id: str, device_id: uuid.UUID | str, provider: str, reason: str, source: str
) -> NewEvent:
    """``recipient.device_removed``: a push device went, not at the API caller's request:
    a send found its token dead (``source`` ``provider``; ``reason``: the provider's
    error code, e.g. ``UNREGISTERED``, ``BadDeviceToken``, ``410``) or an administrator
    deleted it in the console (``admin:<username>``). Never the token. About a person,
    as ``recipient.unsubscribed``."""
    return NewEvent(
        type="recipient.device_removed",
        data={
            "recipient": recipient_id,
            "device_id": str(device_id),
            "provider": provider,
            "reason": reason[:100],
            "source": source,
        },
    )


def recipient_connection_removed(
    *, recipient_id: str, connection_id: uuid.UUID | str, provider: str, reason: str, source: str
) -> NewEvent:
    """``recipient.connection_removed``: a chat connection went, as a device does in
    ``recipient.device_removed`` (an incoming webhook answering 404 or 410: ``reason``
    ``404``/``410``). Never the webhook URL."""
    return NewEvent(
        type="recipient.connection_removed",
        data={
            "recipient": recipient_id,
            "connection_id": str(connection_id),
            "provider": provider,
            "reason": reason[:100],
            "source": source,
        },
    )


def batch_closed(
    *,
    batch_id: uuid.UUID | str,
    workflow_key: str,
    node_id: str,
    recipient_id: str | None,
    count: int,
    opened_at: datetime,
    closed_at: datetime | None,
) -> NewEvent:
    """``batch.closed``: a batch stopped taking members (its window ended, it was
    flushed, or it reached ``max_items``); ``count`` is how many joined it, the opener
    included."""
    return NewEvent(
        type="batch.closed",
        data={
            "batch_id": str(batch_id),
            "workflow": workflow_key,
            "node_id": node_id,
            "recipient": recipient_id,
            "count": count,
            "opened_at": opened_at.isoformat(),
            "closed_at": closed_at.isoformat() if closed_at else None,
        },
        workflow_key=workflow_key,
    )
