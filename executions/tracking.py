"""Delivery status from the providers: anymail's tracking signal and Twilio's
status callbacks update the delivery found by its provider message id, keep the raw
event, and deliver each status change to the instance's inbox as ``delivery.<status>``.

A status only moves up ``TRACKING_RANK`` (queued < sent < delivered < opened < clicked
< bounced = failed < complained): one conditional UPDATE whose WHERE lists the lower
statuses, so repeated, concurrent and out-of-order reports are harmless. The inbox event
id is ``delivery:<delivery id>:<status>``, so a status reaches an instance at most once.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from recipients.models import OptOutSource
from recipients.preferences import opt_out, unsubscribe_scope
from status_webhooks import events as status_events
from status_webhooks.outbox import record
from triggers import inbox

from .erasure_scrub import ERASED
from .models import TRACKING_RANK, Delivery, DeliveryEvent, TrackingStatus

logger = logging.getLogger("notifyflow.tracking")

# anymail's normalized event types -> ours; others (deferred, unsubscribed, ...) are kept
# as raw events without a status.
ANYMAIL_STATUSES = {
    "queued": TrackingStatus.QUEUED,
    "sent": TrackingStatus.SENT,
    "delivered": TrackingStatus.DELIVERED,
    "opened": TrackingStatus.OPENED,
    "clicked": TrackingStatus.CLICKED,
    "bounced": TrackingStatus.BOUNCED,
    "rejected": TrackingStatus.FAILED,
    "failed": TrackingStatus.FAILED,
    "complained": TrackingStatus.COMPLAINED,
}
# anymail's event types that opt the delivery's recipient out, with the
# source their audit row names.
ANYMAIL_OPT_OUTS = {
    "unsubscribed": OptOutSource.ESP_UNSUBSCRIBED,
    "complained": OptOutSource.ESP_COMPLAINED,
}
# Twilio's MessageStatus -> ours.
TWILIO_STATUSES = {
    "accepted": TrackingStatus.QUEUED,
    "scheduled": TrackingStatus.QUEUED,
    "queued": TrackingStatus.QUEUED,
    "sending": TrackingStatus.QUEUED,
    "sent": TrackingStatus.SENT,
    "delivered": TrackingStatus.DELIVERED,
    "read": TrackingStatus.OPENED,
    "undelivered": TrackingStatus.FAILED,
    "failed": TrackingStatus.FAILED,
    "canceled": TrackingStatus.FAILED,
}


def delivery_status_record(
    *,
    provider: str,
    message_id: str,
    provider_event: str,
    status: str | None,
    raw: dict[str, Any],
    occurred_at: datetime | None = None,
) -> DeliveryEvent | None:
    """Record one provider report for the delivery with ``message_id``; move its tracking
    status up if ``status`` ranks higher, and then deliver ``delivery.<status>`` to its
    instance (skipped by the inbox when the instance has finished) and report it as a
    status event (``delivery.<status>``) in the same transaction. None when no
    delivery has that message id (an ESP reporting a message we did not send)."""
    if not message_id:
        return None
    delivery = (
        Delivery.objects.filter(provider_message_id=message_id[:255])
        .only("id", "instance_id", "node_id", "channel", "recipient")
        .annotate(workflow_key=F("instance__workflow__key"))
        .order_by("id")
        .first()
    )
    if delivery is None:
        logger.info("%s report for unknown message id %r ignored", provider, message_id)
        return None
    now = timezone.now()
    occurred_at = _storable(occurred_at)
    if delivery.recipient == ERASED:
        # Its address was erased: a provider's report quotes it; keep none.
        raw = {"erased": ERASED}
    with transaction.atomic():
        applied = False
        if status:
            lower = [s for s, rank in TRACKING_RANK.items() if rank < TRACKING_RANK[status]]
            applied = (
                Delivery.objects.filter(pk=delivery.pk, tracking_status__in=lower).update(
                    tracking_status=status, tracking_updated_at=now
                )
                == 1
            )
        event = DeliveryEvent.objects.create(
            delivery=delivery,
            provider=provider[:64],
            provider_event=provider_event[:64],
            status=status or "",
            applied=applied,
            occurred_at=occurred_at,
            received_at=now,
            raw=raw,
        )
        if applied:
            inbox.deliver(
                name=f"delivery.{status}",
                event_id=f"delivery:{delivery.pk}:{status}",
                context={
                    "node_id": delivery.node_id,
                    "channel": delivery.channel,
                    "message_id": message_id,
                    "provider": provider,
                },
                subjects=[f"{inbox.INSTANCE_SUBJECT}{delivery.instance_id}"],
            )
            if status in status_events.TRACKING_EVENTS:
                record(
                    events=[
                        status_events.delivery_status(
                            instance_id=delivery.instance_id,
                            workflow_key=delivery.workflow_key,
                            status=status,
                            node_id=delivery.node_id,
                            channel=delivery.channel,
                            provider=provider,
                            message_id=message_id,
                        )
                    ],
                    at=now,
                )
    return event


def _storable(at: datetime | None) -> datetime | None:
    """A provider's timestamp if PostgreSQL can give it back, else None: an instant at
    the calendar's edge (``9999-12-31T23:59:59-05:00`` is year 10000 in UTC) would be
    stored, and then no page showing the event could read it."""
    if at is None:
        return None
    try:
        utc = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    except OverflowError:
        return None
    return utc


def anymail_tracking_received(sender: Any, event: Any, esp_name: str, **kwargs: Any) -> None:
    """Receiver of ``anymail.signals.tracking`` (connected in ExecutionsConfig.ready)."""
    raw = event.esp_event
    if not isinstance(raw, dict):  # some ESPs hand a parsed object; keep what we can
        raw = {"esp_event": str(raw)}
    recorded = delivery_status_record(
        provider=esp_name.lower(),
        message_id=str(event.message_id or ""),
        provider_event=str(event.event_type or ""),
        status=ANYMAIL_STATUSES.get(event.event_type),
        raw=raw,
        occurred_at=event.timestamp,
    )
    source = ANYMAIL_OPT_OUTS.get(event.event_type)
    if recorded is not None and source is not None:
        delivery_recipient_opt_out(
            delivery_id=recorded.delivery_id, source=source, provider=esp_name.lower()
        )


def delivery_recipient_opt_out(*, delivery_id: int, source: str, provider: str) -> bool:
    """Opt the recipient of the delivery's instance out of the workflow's unsubscribe
    scope (its first category, else the workflow), as its List-Unsubscribe link would.
    False when the instance has no recipient (a payload-only send) or nothing changed."""
    row = (
        Delivery.objects.filter(pk=delivery_id)
        .values_list(
            "instance__recipient_id", "instance__workflow__key", "instance__workflow__categories"
        )
        .first()
    )
    if row is None or row[0] is None:
        return False
    recipient_id, workflow_key, categories = row
    return opt_out(
        recipient_id=recipient_id,
        scope=unsubscribe_scope(workflow_key=workflow_key, categories=categories or []),
        source=source,
        details={"provider": provider, "delivery": delivery_id},
    )
