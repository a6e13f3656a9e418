"""Recording on PostgreSQL: the claim and the outcome are one statement each.

The claim reads this node's delivery record in its statement (a join). The outcome -
the delivery's outcome and its provider attempts, the step log, the instance's
transition and its audit row, a wait's consumed event, an emit's outbox row - is one
autocommit statement, made durable in itself (workers default to asynchronous commit:
a lost 'sent' record or advance would mean a duplicate send). Fragments come from
``deliveries`` and ``triggers.inbox``; each tests ``state.APPLIED``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from notifyflow import db
from recipients.models import Recipient
from triggers import inbox, state
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow

from ..deliveries import SENT_RECORDED, delivery_outcome_statements, sent_event
from ..models import Delivery, StepExecutionLog
from ..step import Audience, StepRecipient
from ..versions import pinned_version
from .advance import apply_outcome
from .base import Claimed, StepRecord

logger = logging.getLogger("notifyflow.engine")

# A step whose outcome could not be written because the connection died reconnects and
# writes it again after these pauses (the last one repeated), for as long as its lease
# and its soft time limit allow: the message it sent must not be sent again, and after
# the lease the sweeper would re-run the step (an outage used to send some emails twice
# when this gave up after 3.5 s: tests/executions/test_outcome_write_outage.py). Past
# that it gives up; the task retries and the lease expires (the sweeper's path).
RECORD_RETRY_DELAYS_S = (0.0, 0.5, 1.0, 2.0)
# Stop retrying this long before the lease ends or the soft time limit interrupts.
RECORD_RETRY_MARGIN_S = 2.0

_DELIVERY = Delivery._meta
_DELIVERY_OUTPUT = _DELIVERY.get_field("output")
_INSTANCE = TriggerInstance._meta
_RECIPIENT = Recipient._meta
_WORKFLOW = Workflow._meta
# The recipient's columns the step reads (templates and the preference check).
RECIPIENT_FIELDS = ("id", "email", "phone", "timezone", "locale", "properties", "preferences")


def _q(meta: Any, name: str) -> str:
    return f'"{meta.get_field(name).column}"'


# The claim's statement also reads this node's delivery record, the instance's recipient
# (addresses and preferences as they are now: SPEC §12) and its workflow's critical and
# categories settings - primary-key lookups in the same statement.
CLAIM_JOIN = state.Join(
    clause=(
        f'LEFT JOIN "{_DELIVERY.db_table}" d'
        f' ON d.{_q(_DELIVERY, "instance")} = {state.CLAIMED}."{_INSTANCE.pk.column}"'
        f" AND d.{_q(_DELIVERY, 'node_id')} = {state.CLAIMED}.{_q(_INSTANCE, 'current_node_id')}"
        f' LEFT JOIN "{_RECIPIENT.db_table}" r'
        f' ON r."{_RECIPIENT.pk.column}" = {state.CLAIMED}.{_q(_INSTANCE, "recipient")}'
        f' JOIN "{_WORKFLOW.db_table}" w'
        f' ON w."{_WORKFLOW.pk.column}" = {state.CLAIMED}.{_q(_INSTANCE, "workflow")}'
    ),
    columns=(
        f"d.{_q(_DELIVERY, 'status')} AS delivery_status",
        f'd."{_DELIVERY_OUTPUT.column}" AS delivery_output',
        *(f"r.{_q(_RECIPIENT, name)} AS rcp_{name}" for name in RECIPIENT_FIELDS),
        f"w.{_q(_WORKFLOW, 'critical')} AS workflow_critical",
        f"w.{_q(_WORKFLOW, 'categories')} AS workflow_categories",
    ),
)


def _json(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


def claim(*, instance_id: uuid.UUID | str, worker: str, now: datetime) -> Claimed | None:
    instance = state.claim(instance_id=instance_id, worker=worker, now=now, join=CLAIM_JOIN)
    if instance is None:
        return None
    # The joined columns arrive as attributes of the raw row; JSON still needs decoding.
    status = getattr(instance, "delivery_status", None)
    raw = getattr(instance, "delivery_output", None)
    output = None if raw is None else _DELIVERY_OUTPUT.to_python(_json(raw))
    person = None
    if getattr(instance, "recipient_id", None) is not None:
        values: dict[str, Any] = {
            name: getattr(instance, f"rcp_{name}", None) for name in RECIPIENT_FIELDS
        }
        if values["id"] is not None:
            values["properties"] = _json(values["properties"]) or {}
            values["preferences"] = _json(values["preferences"]) or {}
            person = StepRecipient(**values)
    audience = Audience(
        recipient=person,
        critical=bool(getattr(instance, "workflow_critical", False)),
        categories=tuple(_json(getattr(instance, "workflow_categories", None)) or ()),
        recipient_erased=instance.recipient_erased,
    )
    version = pinned_version(instance.workflow_version_id)
    return Claimed(instance, version, status, output, audience)


def record(rec: StepRecord) -> bool:
    def write(replay: bool) -> bool:
        also = [_step_log_insert(rec, only_if_applied=replay)]
        sent = None
        if rec.step is not None:
            also += delivery_outcome_statements(rec.step, only_if_applied=replay)
            sent = sent_event(rec.step)
        also += _running_instance_statements(rec)
        # One autocommit statement, durable whatever the session's setting: no BEGIN /
        # SET LOCAL / COMMIT round trips around it. A send's ``delivery.sent`` goes with
        # the delivery's 'sent' record, whatever the transition does.
        return apply_outcome(
            rec, also=also, durable=True, sent=[(sent, SENT_RECORDED)] if sent else ()
        )

    return record_reconnecting(write, rec.instance.pk, deadline=_deadline(rec))


def _running_instance_statements(rec: StepRecord) -> list[state.Statement]:
    """A wait's consumed event and an emit's outbox row (each only if the transition
    applied)."""
    result, node_id = rec.result, rec.instance.current_node_id or ""
    if result is None:
        return []
    statements = []
    if result.consume_inbox_id is not None:
        statements.append(
            inbox.inbox_consume(inbox_id=result.consume_inbox_id, node_id=node_id, now=rec.finished)
        )
    if result.emit is not None:
        statements.append(
            inbox.outbox_insert(
                instance_id=rec.instance.pk, node_id=node_id, now=rec.finished, **result.emit
            )
        )
    return statements


_LOG_FIELDS = {f.attname: f for f in StepExecutionLog._meta.concrete_fields if not f.primary_key}
_CANCELLED_NOW = (
    f'EXISTS (SELECT 1 FROM "{_INSTANCE.db_table}" WHERE "{_INSTANCE.pk.column}" = %s'
    f" AND {_q(_INSTANCE, 'status')} = %s)"
)


def _step_log_insert(rec: StepRecord, *, only_if_applied: bool) -> state.Statement:
    """The step log's INSERT: its error columns depend on whether the fenced transition
    applied and, if not, on whether the instance was cancelled meanwhile
    (``StepRecord.not_applied``). With ``only_if_applied`` (a replay after a lost
    connection) the row is written only with the transition."""
    lost, cancelled = rec.not_applied(cancelled=False), rec.not_applied(cancelled=True)
    columns, selects, params = [], [], []
    conn = db.current()
    for name, field in _LOG_FIELDS.items():
        columns.append(f'"{field.column}"')
        if name in lost:
            selects.append(
                f"CASE WHEN {state.APPLIED} THEN %s WHEN {_CANCELLED_NOW} THEN %s ELSE %s END"
            )
            params += [rec.log[name], rec.log["trigger_id"], TriggerStatus.CANCELLED]
            params += [cancelled[name], lost[name]]
        else:
            selects.append("%s")
            params.append(field.get_db_prep_save(rec.log[name], conn))
    where = f" WHERE {state.APPLIED}" if only_if_applied else ""
    return state.Statement(
        f'INSERT INTO "{StepExecutionLog._meta.db_table}" ({", ".join(columns)})'
        f" SELECT {', '.join(selects)}{where}",
        params,
    )


def _deadline(rec: StepRecord) -> float:
    """The ``time.monotonic()`` until which a lost outcome write may be retried: while the
    lease holds (the sweeper re-runs the step after it) and before the task's soft time
    limit (which would interrupt the retries), less a margin."""
    now = timezone.now()
    locked_until = rec.instance.locked_until
    lease_left = (
        (locked_until - now).total_seconds()
        if locked_until is not None
        else settings.NOTIFYFLOW_LEASE_S
    )
    soft_left = settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S - (now - rec.started).total_seconds()
    return time.monotonic() + min(lease_left, soft_left) - RECORD_RETRY_MARGIN_S


def record_reconnecting(
    write: Callable[[bool], bool], instance_id: uuid.UUID | str, *, deadline: float
) -> bool:
    """Run ``write(replay)``; if the connection dies, reconnect and run it again after
    each of RECORD_RETRY_DELAYS_S, then every last one of them until ``deadline``
    (``time.monotonic()``).

    Safe to repeat: the transition is fenced on the lease token and the delivery update
    on status 'sending', so they apply once; a replay writes the step log (and consumes
    an event, writes an outbox row, a provider attempt) only together with the
    transition (had the first COMMIT landed after all, those rows exist). Raises the
    connection error when the database stays away past the deadline.
    """
    attempt = 0
    while True:
        try:
            return write(attempt > 0)
        except db.DATABASE_LOST as exc:
            pause = RECORD_RETRY_DELAYS_S[min(attempt, len(RECORD_RETRY_DELAYS_S) - 1)]
            # Each pause once at least (a terminated backend, a quick restart), whatever
            # the deadline; then on while the deadline allows.
            if attempt >= len(RECORD_RETRY_DELAYS_S) and time.monotonic() + pause >= deadline:
                raise
            logger.warning("step %s: outcome not recorded (%s); reconnecting", instance_id, exc)
        time.sleep(pause)
        connection.close()  # drop the dead connection; the next statement reconnects
        attempt += 1
