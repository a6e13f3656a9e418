"""Recording on PostgreSQL (``PostgresStepRecorder``): the claim and the outcome are one
statement each. This module holds every piece of a step's statements but the
transition's own (``triggers.state``'s store builds the fenced UPDATE from what
``advance`` decides, and puts these pieces in it).

The claim is ``state.claim``'s fenced UPDATE returning the row, with ``CLAIM_JOIN``:
this node's delivery record, the recipient and the workflow's settings, read in the
same statement.

The outcome is one autocommit statement, made durable in itself (workers default to
asynchronous commit: a lost 'sent' record or advance would mean a duplicate send). As
PostgreSQL receives it, part by part::

    WITH moved AS (UPDATE <instance> SET ...      -- the fenced transition, by id, lease
          WHERE ... RETURNING id)                 --   token and status: APPLIED iff it
                                                  --   returned a row (state.postgres:
                                                  --   update_sql, CLAIMED, APPLIED)
       , audit AS (INSERT ... FROM moved)         -- its audit row, if audited (ibid.)
       , step_log AS (step_log_insert_sql)        -- the step log; its error columns say
                                                  --   whether APPLIED
       , delivery_outcome AS (INSERT ... ON       -- a send's outcome, APPLIED or not: the
           CONFLICT DO UPDATE ... WHERE           --   message was sent (SENT_RECORDED);
           status <> 'sent')                      --   the row's only write (_outcome_upsert)
       , attempts AS (INSERT ... SELECT ...)      -- its provider calls (_attempts_insert)
       , inbox_consumed AS (INBOX_CONSUME)        -- a wait's event, if APPLIED
       , emitted AS (EMIT_INSERT)                 -- an emit's outbox row, if APPLIED
    SELECT EXISTS (SELECT 1 FROM moved)           -- APPLIED: the statement's answer
         , CASE WHEN <an endpoint is active>      -- the status events: delivery.sent if
           THEN notifyflow_webhook_events(...)    --   SENT_RECORDED, the others if
           END                                    --   APPLIED (state.postgres.
                                                  --   status_events_sql; the function:
                                                  --   status_webhooks migration 0002)
         , set_config('synchronous_commit', 'on', true)   -- state.postgres.DURABLE

A part is there only when the step has it (a send, a wait's event, an emit). A replay
after a lost connection (``record_reconnecting``) writes the step log and the attempts
only ``WHERE APPLIED`` too.
"""

from __future__ import annotations

import functools
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
from triggers import state
from triggers.models import InboxEvent, OutboxEvent, TriggerInstance, TriggerStatus
from workflows.models import Workflow

from ..deliveries import sent_event
from ..models import Delivery, DeliveryAttempt, DeliveryStatus, StepExecutionLog
from ..step import Audience, StepContext, StepRecipient
from ..versions import pinned_version
from .advance import apply_outcome
from .base import RECIPIENT_FIELDS, Claimed, StepRecord, StepRecorder

logger = logging.getLogger("notifyflow.engine")

# A step whose outcome could not be written because the connection died reconnects and
# writes it again after these pauses (the last one repeated), for as long as its lease
# and its soft time limit allow: the message it sent must not be sent again, and after
# the lease the sweeper would re-run the step (an outage used to send some emails twice
# when this gave up after 3.5 s: tests/executions/recording/test_postgres.py). Past
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


def _q(meta: Any, name: str) -> str:
    return f'"{meta.get_field(name).column}"'


# The claim's statement also reads this node's delivery record, the instance's recipient
# (addresses and preferences as they are now, not at creation) and its workflow's critical and
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
        f"w.{_q(_WORKFLOW, 'default_locale')} AS workflow_default_locale",
    ),
)


def _json(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


class PostgresStepRecorder(StepRecorder):
    """The claim and the outcome, one statement each (the module's docstring)."""

    def claim(self, *, instance_id: uuid.UUID | str, worker: str, now: datetime) -> Claimed | None:
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
            default_locale=getattr(instance, "workflow_default_locale", None) or "",
        )
        version = pinned_version(instance.workflow_version_id)
        return Claimed(instance, version, status, output, audience)

    def record(self, rec: StepRecord) -> bool:
        def write(replay: bool) -> bool:
            also = [_step_log_insert(rec, only_if_applied=replay)]
            sent = None
            if rec.step is not None:
                also += _delivery_outcome_statements(rec.step, only_if_applied=replay)
                sent = sent_event(rec.step)
            also += _running_instance_statements(rec)
            # One autocommit statement, durable whatever the session's setting: no BEGIN
            # / SET LOCAL / COMMIT round trips around it. A send's ``delivery.sent`` goes
            # with the delivery's 'sent' record, whatever the transition does.
            return apply_outcome(
                rec, also=also, durable=True, sent=[(sent, SENT_RECORDED)] if sent else ()
            )

        return record_reconnecting(write, rec.instance.pk, deadline=_deadline(rec))


# --- the step log ----------------------------------------------------------------------

_LOG_FIELDS = {f.attname: f for f in StepExecutionLog._meta.concrete_fields if not f.primary_key}
_CANCELLED_NOW = (
    f'EXISTS (SELECT 1 FROM "{_INSTANCE.db_table}" WHERE "{_INSTANCE.pk.column}" = %s'
    f" AND {_q(_INSTANCE, 'status')} = %s)"
)


@functools.cache
def step_log_insert_sql(outcome_columns: tuple[str, ...], only_if_applied: bool) -> str:
    """The step log's INSERT ... SELECT, a parameter per column but for the
    ``outcome_columns`` (its error columns): ``CASE WHEN APPLIED THEN <the step's> WHEN
    <cancelled meanwhile> THEN <cancelled> ELSE <lease lost> END``. With
    ``only_if_applied`` (a replay after a lost connection) the row is written only with
    the transition."""
    selects = [
        f"CASE WHEN {state.APPLIED} THEN %s WHEN {_CANCELLED_NOW} THEN %s ELSE %s END"
        if name in outcome_columns
        else "%s"
        for name in _LOG_FIELDS
    ]
    columns = ", ".join(f'"{field.column}"' for field in _LOG_FIELDS.values())
    where = f" WHERE {state.APPLIED}" if only_if_applied else ""
    return (
        f'INSERT INTO "{StepExecutionLog._meta.db_table}" ({columns})'
        f" SELECT {', '.join(selects)}{where}"
    )


def _step_log_insert(rec: StepRecord, *, only_if_applied: bool) -> state.Statement:
    """``step_log_insert_sql`` with the step's values (``StepRecord.not_applied`` gives
    the error columns when the transition did not apply)."""
    lost, cancelled = rec.not_applied(cancelled=False), rec.not_applied(cancelled=True)
    params: list[Any] = []
    for name, field in _LOG_FIELDS.items():
        if name in lost:
            params += [rec.log[name], rec.log["trigger_id"], TriggerStatus.CANCELLED]
            params += [cancelled[name], lost[name]]
        else:
            params.append(db.prep_save(field)(rec.log[name]))
    sql = step_log_insert_sql(tuple(lost), only_if_applied)
    return state.Statement(sql, params, name="step_log")


# --- the delivery's outcome and its provider attempts ----------------------------------

# The delivery's upsert, named: ``delivery.sent`` is written when it applied (the
# message was sent, the row was not 'sent' yet), whether or not the transition did.
OUTCOME_CTE = "delivery_outcome"
SENT_RECORDED = f"EXISTS (SELECT 1 FROM {OUTCOME_CTE})"

_DELIVERY_TABLE = f'"{_DELIVERY.db_table}"'
_DELIVERY_FIELDS = {f.name: f for f in _DELIVERY.concrete_fields}
_ATTEMPT_FIELDS = {f.name: f for f in DeliveryAttempt._meta.concrete_fields if not f.primary_key}


def _delivery_outcome_statements(
    step: StepContext, *, only_if_applied: bool = False
) -> list[state.Statement]:
    """``deliveries.record_delivery`` as statements: the delivery's upsert and its
    attempts' INSERT; none when nothing was sent.

    The upsert applies whatever the transition does (the message *was* sent). With
    ``only_if_applied`` (a replay after a lost connection) each attempt row is written
    only with the transition, like the step log, so a replay after a landed COMMIT adds
    none."""
    if not step.delivery.pending:
        return []
    return [_outcome_upsert(step), *_attempts_insert(step, only_if_applied)]


_UPSERT_KEY = f"{_q(_DELIVERY, 'instance')}, {_q(_DELIVERY, 'node_id')}"
_STATUS, _ATTEMPTS = _q(_DELIVERY, "status"), _q(_DELIVERY, "attempts")


@functools.cache
def _outcome_upsert_sql(names: tuple[str, ...]) -> str:
    """``INSERT INTO delivery (instance, node, <names>) VALUES ... ON CONFLICT (instance,
    node) DO UPDATE SET <names> WHERE status <> 'sent' RETURNING id``: a single send's
    row is written once, here; a marked one (``sending``) or an earlier attempt's
    (``failed``) is updated; a ``sent`` one stands (an attempt that finished first, or
    this statement's first run when it is replayed). ``attempts`` never goes down (a
    mark counted its own)."""
    fields = _DELIVERY_FIELDS
    columns = ", ".join(f'"{fields[name].column}"' for name in ("instance", "node_id", *names))
    sets = ", ".join(
        f"{_ATTEMPTS} = GREATEST({_DELIVERY_TABLE}.{_ATTEMPTS}, excluded.{_ATTEMPTS})"
        if name == "attempts"
        else f'"{fields[name].column}" = excluded."{fields[name].column}"'
        for name in names
        if name != "created_at"
    )
    return (
        f"INSERT INTO {_DELIVERY_TABLE} ({columns})"
        f" VALUES ({', '.join(['%s'] * (len(names) + 2))})"
        f" ON CONFLICT ({_UPSERT_KEY}) DO UPDATE SET {sets}"
        f" WHERE {_DELIVERY_TABLE}.{_STATUS} <> '{DeliveryStatus.SENT}'"
        f" RETURNING {_q(_DELIVERY, 'id')}"
    )


def _outcome_upsert(step: StepContext) -> state.Statement:
    """The delivery's outcome (``_outcome_upsert_sql``), named ``OUTCOME_CTE``."""
    fields = _DELIVERY_FIELDS
    now = timezone.now()
    values = {**step.delivery.pending, "created_at": now, "updated_at": now}
    params = [db.prep_save(fields[name])(value) for name, value in values.items()]
    return state.Statement(
        _outcome_upsert_sql(tuple(values)),
        [step.instance_id, step.node_id, *params],
        name=OUTCOME_CTE,
    )


# The delivery's id for its attempt rows: the row the outcome wrote, else (a ``sent`` row
# that stood) the one there already. Parameters: instance, node. NULL only when another
# attempt's ``sent`` row was committed after this statement's snapshot was taken (two
# live attempts of one node: a worker frozen past its lease): its attempt rows are
# then not written, rather than failing the step's whole outcome.
_DELIVERY_ID = (
    f"(SELECT COALESCE((SELECT {_q(_DELIVERY, 'id')} FROM {OUTCOME_CTE}),"
    f" (SELECT {_q(_DELIVERY, 'id')} FROM {_DELIVERY_TABLE}"
    f" WHERE {_q(_DELIVERY, 'instance')} = %s AND {_q(_DELIVERY, 'node_id')} = %s)) AS id)"
)


def _attempts_insert(step: StepContext, only_if_applied: bool) -> list[state.Statement]:
    """One ``INSERT ... SELECT`` of the delivery's id (``_DELIVERY_ID``) joined to every
    provider call, in the order they were made (``VALUES``, each column cast to its
    type); on a replay only ``WHERE APPLIED``. None when no provider was called."""
    if not step.delivery.attempts:
        return []
    rows = []
    for attempt in step.delivery.attempts:
        values = {"attempt": step.delivery.attempt, **attempt}
        rows.append([db.prep_save(_ATTEMPT_FIELDS[n])(values[n]) for n in _ATTEMPT_NAMES])
    sql = _attempts_insert_sql(len(rows), only_if_applied)
    # In the statement's order: the delivery's key, then the calls' columns.
    params = [step.instance_id, step.node_id, *(p for row in rows for p in row)]
    return [state.Statement(sql, params, name="attempts")]


# An attempt row's columns but the delivery's, in the statement's order.
_ATTEMPT_NAMES = [name for name in _ATTEMPT_FIELDS if name != "delivery"]


@functools.cache
def _attempts_insert_sql(rows: int, only_if_applied: bool) -> str:
    """``_attempts_insert``'s statement for ``rows`` provider calls."""
    names = _ATTEMPT_NAMES
    conn = db.current()
    casts = ", ".join(f"%s::{_ATTEMPT_FIELDS[n].cast_db_type(conn)}" for n in names)
    columns = ", ".join(f'"{_ATTEMPT_FIELDS[n].column}"' for n in names)
    where = f"d.id IS NOT NULL AND {state.APPLIED}" if only_if_applied else "d.id IS NOT NULL"
    aliases = ", ".join(f"c{index}" for index in range(len(names)))
    return (
        f'INSERT INTO "{DeliveryAttempt._meta.db_table}"'
        f' ("{_ATTEMPT_FIELDS["delivery"].column}", {columns})'
        f" SELECT d.id, v.* FROM {_DELIVERY_ID} d"
        f" CROSS JOIN (VALUES {', '.join(f'({casts})' for _ in range(rows))}) AS v ({aliases})"
        f" WHERE {where}"
    )


# --- a wait's consumed event, an emit's outbox row -------------------------------------

_INBOX = InboxEvent._meta
_OUTBOX = OutboxEvent._meta

# INBOX_CONSUME: the event a wait node took, consumed only if the transition applied (a
# cancelled or recovered step consumes nothing). Parameters: now, node, inbox id.
INBOX_CONSUME = (
    f'UPDATE "{_INBOX.db_table}" SET {_q(_INBOX, "consumed_at")} = %s, '
    f"{_q(_INBOX, 'consumed_by_node')} = %s WHERE {_q(_INBOX, 'id')} = %s "
    f"AND {_q(_INBOX, 'consumed_at')} IS NULL AND {state.APPLIED}"
)

_EMITTED_FIELDS = {f.name: f for f in _OUTBOX.concrete_fields if not f.primary_key}
_EMITTED = (
    "instance",
    "node_id",
    "name",
    "event_id",
    "subjects",
    "context",
    "created_at",
    "processed_at",
)
# EMIT_INSERT: an emit node's outbox row (``triggers.outbox`` processes it), written only if the
# transition applied, and once per (instance, node). Parameters: ``_EMITTED``'s values.
EMIT_INSERT = (
    f'INSERT INTO "{_OUTBOX.db_table}" '
    f"({', '.join(_q(_OUTBOX, name) for name in _EMITTED)}) "
    f"SELECT {', '.join(['%s'] * len(_EMITTED))} WHERE {state.APPLIED} "
    f"ON CONFLICT ({_q(_OUTBOX, 'instance')}, {_q(_OUTBOX, 'node_id')}) DO NOTHING"
)


def _running_instance_statements(rec: StepRecord) -> list[state.Statement]:
    """A wait's consumed event (INBOX_CONSUME) and an emit's outbox row (EMIT_INSERT)."""
    result, node_id = rec.result, rec.instance.current_node_id or ""
    if result is None:
        return []
    statements = []
    if result.consume_inbox_id is not None:
        consumed_at = _INBOX.get_field("consumed_at").get_db_prep_save(rec.finished, connection)
        params = [consumed_at, node_id, result.consume_inbox_id]
        statements.append(state.Statement(INBOX_CONSUME, params, name="inbox_consumed"))
    if result.emit is not None:
        values = {
            "instance": rec.instance.pk,
            "node_id": node_id,
            **result.emit,  # name, event_id, subjects, context
            "created_at": rec.finished,
            "processed_at": None,
        }
        params = [
            _EMITTED_FIELDS[name].get_db_prep_save(values[name], connection) for name in _EMITTED
        ]
        statements.append(state.Statement(EMIT_INSERT, params, name="emitted"))
    return statements


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
    on a status not 'sent', so they apply once; a replay writes the step log (and consumes
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
