"""The per-(instance, node) guard around every provider call.

Guarantee: once a send is recorded ``sent``, no retry, redelivered message or recovered
crash sends it again. What stays at-least-once: a worker that dies (or loses its
database connection) after the provider accepted the message but before the step's
outcome transaction commits - the ``sent`` record is written in that transaction. Such
a delivery is left ``sending`` and the next attempt sends again, with the same
idempotency key (the email Message-ID header; Twilio's Messages API takes none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.utils import timezone

from triggers.state import Statement

from .models import Delivery, DeliveryStatus, normalize_recipient
from .providers.base import ProviderError

if TYPE_CHECKING:
    from .nodes.base import StepContext

_TABLE = Delivery._meta.db_table
# One statement: create the row, or mark a not-yet-sent one as sending again. Returns
# nothing when the row is already 'sent' (then we must not send).
_BEGIN_SQL = (
    f"INSERT INTO {_TABLE} (instance_id, node_id, channel, recipient, status,"
    " provider_message_id, output, attempts, created_at, updated_at)"
    " VALUES (%s, %s, %s, %s, 'sending', '', '{}', 1, %s, %s)"
    " ON CONFLICT (instance_id, node_id) DO UPDATE"
    f" SET status = 'sending', attempts = {_TABLE}.attempts + 1,"
    " recipient = excluded.recipient, updated_at = excluded.updated_at"
    f" WHERE {_TABLE}.status <> 'sent'"
    " RETURNING status"
)


def guarded_send(
    *, step: StepContext, channel: str, recipient: str, send: Callable[[], dict]
) -> dict[str, Any]:
    """Call ``send`` unless this node's message was already sent; return its output.
    ``recipient`` (the rendered address or number) is recorded, normalized, on the
    delivery row.

    The outcome is not written here: ``step.pending_delivery`` carries it to the step's
    outcome transaction (``record_delivery``).
    """
    if step.delivery_status == DeliveryStatus.SENT:
        return {**(step.delivery_output or {}), "deduplicated": True}
    now = timezone.now()
    instance_id = step.instance_id.hex if connection.vendor == "sqlite" else step.instance_id
    with connection.cursor() as cursor:
        cursor.execute(
            _BEGIN_SQL,
            (instance_id, step.node_id, channel, normalize_recipient(recipient), now, now),
        )
        began = cursor.fetchone()
    if began is None:  # sent by an attempt that finished after our claim read it
        output = (
            Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id)
            .values_list("output", flat=True)
            .get()
        )
        return {**output, "deduplicated": True}
    # No transaction is open here: the provider call never holds a database lock.
    try:
        output = send()
    except ProviderError as exc:
        step.pending_delivery = {
            "status": DeliveryStatus.FAILED,
            "output": {"error": str(exc)},
            "provider_message_id": "",
        }
        raise
    step.pending_delivery = {
        "status": DeliveryStatus.SENT,
        "output": output,
        "provider_message_id": str(output.get("message_id", ""))[:255],
    }
    return output


def record_delivery(step: StepContext) -> None:
    """Write the send's outcome; called inside the step's outcome transaction. Written
    even when the step's own write is fenced out: the message *was* sent."""
    if not step.pending_delivery:
        return
    Delivery.objects.filter(
        instance_id=step.instance_id, node_id=step.node_id, status=DeliveryStatus.SENDING
    ).update(updated_at=timezone.now(), **step.pending_delivery)


def delivery_outcome_update(step: StepContext) -> Statement:
    """``record_delivery`` as SQL, to run inside the step's single outcome statement."""
    fields = {f.name: f for f in Delivery._meta.concrete_fields}
    values = {**step.pending_delivery, "updated_at": timezone.now()}
    sets = ", ".join(f'"{fields[name].column}" = %s' for name in values)
    params = [fields[name].get_db_prep_save(value, connection) for name, value in values.items()]
    instance_column = fields["instance"].column
    return Statement(
        f'UPDATE "{Delivery._meta.db_table}" SET {sets}'
        f' WHERE "{instance_column}" = %s AND node_id = %s AND status = %s',
        [*params, step.instance_id, step.node_id, DeliveryStatus.SENDING],
    )
