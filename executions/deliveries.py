"""The per-(instance, node) guard around every provider call.

Guarantee: once a send is recorded ``sent``, no retry, redelivered message or recovered
crash sends it again. What stays at-least-once: a worker that dies (or loses its
lease) after the provider accepted the message but before the ``sent`` row commits.
That attempt is left ``sending``; the next attempt sends again with the same
idempotency key (the email Message-ID; Twilio's API has no idempotency key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from .models import Delivery, DeliveryStatus
from .nodes.base import StepContext
from .providers.base import ProviderError


def guarded_send(*, step: StepContext, channel: str, send: Callable[[], dict]) -> dict[str, Any]:
    """Call ``send`` unless this node's message was already sent; return its output."""
    existing = Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id).first()
    if existing is not None and existing.status == DeliveryStatus.SENT:
        return {**existing.output, "deduplicated": True}
    if existing is None:
        try:
            with transaction.atomic():
                Delivery.objects.create(
                    instance_id=step.instance_id, node_id=step.node_id, channel=channel,
                    status=DeliveryStatus.SENDING, attempts=1,
                )
        except IntegrityError:
            # Another attempt created it between our read and write: only possible for
            # a zombie, whose write will be fenced anyway. Re-read and obey it.
            existing = Delivery.objects.get(instance_id=step.instance_id, node_id=step.node_id)
            if existing.status == DeliveryStatus.SENT:
                return {**existing.output, "deduplicated": True}
    if existing is not None:
        Delivery.objects.filter(pk=existing.pk).exclude(status=DeliveryStatus.SENT).update(
            status=DeliveryStatus.SENDING, attempts=F("attempts") + 1
        )
    # No transaction is open here: the provider call never holds a database lock.
    try:
        output = send()
    except ProviderError as exc:
        Delivery.objects.filter(
            instance_id=step.instance_id, node_id=step.node_id, status=DeliveryStatus.SENDING
        ).update(status=DeliveryStatus.FAILED, output={"error": str(exc)})
        raise
    # Recorded even if our lease was lost meanwhile: the message *was* sent.
    Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id).update(
        status=DeliveryStatus.SENT, provider_message_id=str(output.get("message_id", ""))[:255],
        output=output,
    )
    return output
