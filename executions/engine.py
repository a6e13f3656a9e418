"""The execution engine: claim one instance, run its current node, record, advance.

Transactions are short and never span a provider call:
claim (tx) -> render + send (no tx) -> record outcome, fenced on the lease (tx) ->
after commit, enqueue the next step.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from notifyflow import db, logs, metrics
from notifyflow.redaction import redact
from triggers import inbox, outbox, state
from triggers.dispatch import dispatch_many_on_commit, dispatch_on_commit
from triggers.inbox_models import InboxEvent, OutboxEvent
from triggers.models import TriggerInstance, TriggerStatus
from triggers.state import Join, Statement
from workflows.definition import node_by_id, outgoing_edges
from workflows.models import WorkflowVersion
from workflows.templating import TemplateError, condition_holds

from .channel_slots import ChannelBusy
from .deliveries import delivery_attempts_insert, delivery_outcome_update, record_delivery
from .models import Delivery, StepExecutionLog
from .nodes import EXECUTORS, NodeResult, StepContext
from .providers.base import ProviderError
from .retry_policy import decide_retry
from .versions import PinnedVersion, pinned_version

logger = logging.getLogger("notifyflow.engine")
S = TriggerStatus
ENGINE_ACTOR = "engine"

# What a lost database connection raises (server restarted or failed over, backend
# terminated): psycopg's "the connection is closed", "server closed the connection
# unexpectedly", "terminating connection due to administrator command".
DATABASE_LOST = (OperationalError, InterfaceError)
# A step whose outcome could not be written because the connection died reconnects and
# writes it again after these pauses (the last one repeated), for as long as its lease
# and its soft time limit allow: the message it sent must not be sent again, and after
# the lease the sweeper would re-run the step (an outage of 12 s used to send 4 of 300
# emails twice when this gave up after 3.5 s). Past that it gives up; the task retries
# and the lease expires (the sweeper's path).
RECORD_RETRY_DELAYS_S = (0.0, 0.5, 1.0, 2.0)
# Stop retrying this long before the lease ends or the soft time limit interrupts.
RECORD_RETRY_MARGIN_S = 2.0


@dataclass
class Claimed:
    instance: TriggerInstance
    version: PinnedVersion
    delivery_status: str | None
    delivery_output: dict[str, Any] | None


_DELIVERY = Delivery._meta
_DELIVERY_OUTPUT = _DELIVERY.get_field("output")
# The claim's statement also reads this node's delivery record (PostgreSQL).
_INSTANCE = TriggerInstance._meta
_DELIVERY_JOIN = Join(
    clause=(
        f'LEFT JOIN "{_DELIVERY.db_table}" d'
        f' ON d."{_DELIVERY.get_field("instance").column}" = moved."{_INSTANCE.pk.column}"'
        f' AND d."{_DELIVERY.get_field("node_id").column}"'
        f' = moved."{_INSTANCE.get_field("current_node_id").column}"'
    ),
    columns=(
        f'd."{_DELIVERY.get_field("status").column}" AS delivery_status',
        f'd."{_DELIVERY_OUTPUT.column}" AS delivery_output',
    ),
)


def claim(
    *, instance_id: uuid.UUID | str, worker: str, now: datetime | None = None
) -> Claimed | None:
    """Claim an enqueued, due instance (``triggers.state.claim``) with what the step needs
    to run: its pinned version and this node's delivery record. None if not claimable."""
    now = now or timezone.now()
    if connection.vendor == "postgresql":
        instance = state.claim(instance_id=instance_id, worker=worker, now=now, join=_DELIVERY_JOIN)
        if instance is None:
            return None
        # The joined columns arrive as attributes of the raw row; JSON still needs decoding.
        status = getattr(instance, "delivery_status", None)
        raw_output = getattr(instance, "delivery_output", None)
        output = (
            None
            if raw_output is None
            else _DELIVERY_OUTPUT.to_python(
                json.loads(raw_output) if isinstance(raw_output, str) else raw_output
            )
        )
    else:
        instance = state.claim(instance_id=instance_id, worker=worker, now=now)
        if instance is None:
            return None
        delivery = (
            Delivery.objects.filter(instance_id=instance.pk, node_id=instance.current_node_id)
            .values_list("status", "output")
            .first()
        )
        status, output = delivery if delivery else (None, None)
    return Claimed(instance, pinned_version(instance.workflow_version_id), status, output)


def build_context(
    instance: TriggerInstance, version: PinnedVersion, now: datetime
) -> dict[str, Any]:
    return {
        "payload": instance.payload,
        "trigger": {
            "id": str(instance.pk),
            "idempotency_key": instance.idempotency_key,
            "created_at": instance.created_at.isoformat(),
            "attempts": instance.attempts,
        },
        "workflow": {
            "key": version.workflow_key,
            "name": version.workflow_name,
            "version": version.number,
        },
        "vars": instance.vars,
        "now": now.isoformat(),
    }


# What a step log holds instead of the payload: the instance keeps it once.
PAYLOAD_REF = {"$ref": "instance.payload"}


def logged_context(context: dict[str, Any]) -> dict[str, Any]:
    """The context as a step log keeps it: the payload by reference, unless
    NOTIFYFLOW_STEP_LOG_FULL_CONTEXT asks for a snapshot (then with the redaction paths
    masked)."""
    if settings.NOTIFYFLOW_STEP_LOG_FULL_CONTEXT:
        return {**context, "payload": redact(context["payload"])}
    return {**context, "payload": PAYLOAD_REF}


def choose_next_node(
    definition: dict[str, Any], node_id: str, context: dict[str, Any]
) -> str | None:
    """The first outgoing edge whose condition holds (or that has none); None = end."""
    for edge in outgoing_edges(definition, node_id):
        condition = edge.get("condition")
        if condition is None or condition_holds(condition, context):
            return edge["to"]
    return None


@dataclass
class _Outcome:
    success: bool
    output: dict[str, Any]
    error: str = ""
    error_kind: str = ""
    permanent: bool = False
    # The node's ``retry`` config (None: SPEC §3's defaults).
    retry_policy: dict[str, Any] | None = None
    # Nothing was tried (no send slot free): run again after this long, no attempt counted.
    defer_s: float | None = None
    # What a failure leads to, for the log line: a retry and when, or the instance failed.
    then: str = ""


def step_execute(*, instance_id: uuid.UUID | str, task_id: str = "", worker: str = "") -> str:
    """Execute the current node of one instance. Returns what happened (for logs).

    Logs one line per step carrying trigger_id, workflow, node_id and attempt (and the
    task's task_id and request_id, bound by executions.worker_hooks)."""
    with logs.bound(task_id=task_id, trigger_id=str(instance_id)):
        result = _step_execute(instance_id=instance_id, task_id=task_id, worker=worker)
        if not result.startswith("failed:"):  # a failure has its WARNING line already
            logger.info("step %s", result)
        return result


def _step_execute(*, instance_id: uuid.UUID | str, task_id: str, worker: str) -> str:
    claimed = claim(instance_id=instance_id, worker=worker)
    if claimed is None:
        return _not_claimed(instance_id)
    instance, version = claimed.instance, claimed.version
    lease = instance.lease_token
    assert lease is not None  # a claimed row always has a lease (database CHECK)
    node_id = instance.current_node_id or ""
    logs.bind(workflow=version.workflow_key, node_id=node_id, attempt=instance.attempts + 1)
    started = timezone.now()
    context = build_context(instance, version, started)
    step: StepContext | None = None
    result: NodeResult | None = None
    next_node: str | None = None
    try:
        node = node_by_id(version.definition, node_id)
    except KeyError:
        node = {"id": node_id, "type": "unknown", "config": {}}
        outcome = _Outcome(
            False, {}, f"node {node_id!r} is not in version {version.number}", "permanent", True
        )
    else:
        step = StepContext(
            instance_id=instance.pk,
            node_id=node_id,
            node_type=node["type"],
            config=node["config"],
            context=context,
            now=started,
            lease_token=lease,
            delivery_status=claimed.delivery_status,
            delivery_output=claimed.delivery_output,
            wait_deadline=instance.wait_deadline,
            waiting_for_event=instance.waiting_for_event,
        )
        outcome, result, next_node = _run_node(step, version.definition, instance.vars)
        outcome.retry_policy = node["config"].get("retry")
    finished = timezone.now()

    log = dict(
        trigger_id=instance.pk,
        workflow_id=instance.workflow_id,
        workflow_version=version.number,
        node_id=node_id,
        node_type=node["type"],
        attempt=instance.attempts + 1,
        started_at=started,
        finished_at=finished,
        input_context=logged_context(context),
        output=outcome.output,
        success=outcome.success,
        error=outcome.error,
        error_kind=outcome.error_kind,
        task_id=task_id[:64],
        worker=worker[:200],
        # A wait with no event yet, a delay at the end: parked here, not an attempt.
        parked=result is not None and result.park_until is not None,
    )
    prefix = outcome.error + "; " if outcome.error else ""
    # What the log says when the fenced outcome could not be written.
    lost = {
        "error": prefix + "lease lost before the outcome was recorded; result discarded",
        "error_kind": "lease_lost",
    }
    cancelled = {
        "error": prefix + "instance cancelled while this step ran; delivery recorded, not advanced",
        "error_kind": "cancelled",
    }
    if connection.vendor == "postgresql":

        def record(replay: bool) -> bool:
            # The delivery's outcome and its provider attempts, the step log, the
            # instance's transition and its audit row (and a wait's consumed event, an
            # emit's outbox row): one statement, one round trip, one commit.
            also = [_step_log_insert(log, lost, cancelled, only_if_moved=replay)]
            if step is not None and step.pending_delivery:
                also.append(delivery_outcome_update(step))
                also += delivery_attempts_insert(step, only_if_moved=replay)
            if result is not None:
                also += _running_instance_statements(instance, result, finished)
            # One autocommit statement, durable whatever the session's setting (workers
            # default to asynchronous commit): a lost 'sent' record or advance would mean
            # a duplicate send. No BEGIN / SET LOCAL / COMMIT round trips around it.
            return _record(
                instance, lease, outcome, result, next_node, finished, also=also, durable=True
            )

        recorded = _record_reconnecting(
            record, instance_id, deadline=_record_deadline(instance, started)
        )
    else:
        with transaction.atomic():
            if step is not None:
                record_delivery(step)
            recorded = _record(instance, lease, outcome, result, next_node, finished)
            if not recorded:
                was_cancelled = TriggerInstance.objects.filter(
                    pk=instance.pk, status=S.CANCELLED
                ).exists()
                log.update(cancelled if was_cancelled else lost)
            elif result is not None:
                _write_running_instance_rows(instance, result, finished)
            StepExecutionLog.objects.create(**log)
    if recorded and result is not None:
        _after_commit(instance, result)
    metrics.STEPS.labels(node["type"], "success" if outcome.success else outcome.error_kind).inc()
    metrics.STEP_SECONDS.labels(node["type"]).observe((finished - started).total_seconds())
    if not outcome.success:
        # Why, where and what next, at WARNING: the line an operator looks for.
        logger.warning(
            "step failed:%s instance %s node %s attempt %d: %s%s",
            outcome.error_kind,
            instance.pk,
            node_id,
            instance.attempts + 1,
            outcome.error,
            f" ({outcome.then})" if recorded and outcome.then else "",
        )
        return f"failed:{outcome.error_kind}"
    if result is not None and result.park_until is not None:
        return "waiting"
    return "advanced" if next_node else "completed"


def _running_instance_statements(
    instance: TriggerInstance, result: NodeResult, now: datetime
) -> list[Statement]:
    """PostgreSQL: the wait's consumed event and the emit's outbox row, in the step's
    outcome statement (each applies only if the fenced transition did)."""
    statements = []
    if result.consume_inbox_id is not None:
        statements.append(
            inbox.inbox_consume(
                inbox_id=result.consume_inbox_id, node_id=instance.current_node_id or "", now=now
            )
        )
    if result.emit is not None:
        statements.append(
            inbox.outbox_insert(
                instance_id=instance.pk,
                node_id=instance.current_node_id or "",
                now=now,
                **result.emit,
            )
        )
    return statements


def _write_running_instance_rows(
    instance: TriggerInstance, result: NodeResult, now: datetime
) -> None:
    """``_running_instance_statements`` through the ORM (other databases)."""
    node_id = instance.current_node_id or ""
    if result.consume_inbox_id is not None:
        InboxEvent.objects.filter(pk=result.consume_inbox_id, consumed_at__isnull=True).update(
            consumed_at=now, consumed_by_node=node_id
        )
    if result.emit is not None:
        OutboxEvent.objects.get_or_create(
            instance_id=instance.pk, node_id=node_id, defaults={**result.emit, "created_at": now}
        )


def _after_commit(instance: TriggerInstance, result: NodeResult) -> None:
    """After the outcome committed: process an emitted event at once (the sweeper
    catches one whose processing is lost), and close the parked wait's window - an
    event delivered between the wait's look at the inbox and its park commit woke
    nothing, so look again and wake now if one arrived."""
    node_id = instance.current_node_id or ""
    if result.emit is not None:
        try:
            outbox.outbox_process(instance_id=instance.pk, node_id=node_id)
        except Exception:  # the sweeper retries it; the step itself is done
            logger.exception("outbox %s:%s processing failed", instance.pk, node_id)
    if result.park_until is not None and result.wait_event is not None:
        if inbox.has_events_after(
            instance_id=instance.pk, name=result.wait_event, after_id=result.inbox_seen_id
        ):
            inbox.wake_waiting(instance_ids=[instance.pk], event=result.wait_event)


def _run_node(
    step: StepContext, definition: dict[str, Any], current_vars: dict[str, Any]
) -> tuple[_Outcome, NodeResult | None, str | None]:
    """Run the node's executor and choose the next node; classify any failure."""
    try:
        result = EXECUTORS[step.node_type](step)
        if result.park_until is not None:  # a wait with nothing yet: stay at this node
            return _Outcome(True, result.output), result, step.node_id
        new_vars = dict(current_vars)
        if result.vars_key:
            new_vars[result.vars_key] = result.output
        next_node = choose_next_node(definition, step.node_id, {**step.context, "vars": new_vars})
        if next_node is None and result.resume_at is not None and result.resume_at > step.now:
            # A delay at the end of the workflow: nothing to advance to, so it parks at
            # its own node until its end; the instance completes when it runs there again.
            result.park_until = result.resume_at
            return _Outcome(True, result.output), result, step.node_id
    except ChannelBusy as exc:
        return _Outcome(False, {}, str(exc), "deferred", defer_s=exc.retry_after_s), None, None
    except ProviderError as exc:
        return (
            _Outcome(
                False, {}, str(exc), "permanent" if exc.permanent else "transient", exc.permanent
            ),
            None,
            None,
        )
    except TemplateError as exc:
        return _Outcome(False, {}, f"edge condition: {exc}", "permanent", True), None, None
    except DATABASE_LOST as exc:
        # Lost before the provider call (a node's statements precede it): nothing was
        # sent. A transient failure like any other, recorded by the caller.
        return _Outcome(False, {}, f"database connection lost: {exc}", "transient"), None, None
    except Exception as exc:  # an unexpected bug: retry, bounded by attempts
        logger.exception("step %s:%s crashed", step.instance_id, step.node_id)
        return (_Outcome(False, {}, f"{exc.__class__.__name__}: {exc}", "transient"), None, None)
    return _Outcome(True, result.output), result, next_node


_LOG_FIELDS = {f.attname: f for f in StepExecutionLog._meta.concrete_fields if not f.primary_key}


_CANCELLED_NOW = (
    f'EXISTS (SELECT 1 FROM "{_INSTANCE.db_table}" WHERE "{_INSTANCE.pk.column}" = %s'
    f' AND "{_INSTANCE.get_field("status").column}" = %s)'
)


def _record_deadline(instance: TriggerInstance, started: datetime) -> float:
    """The ``time.monotonic()`` until which a lost outcome write may be retried: while the
    lease holds (the sweeper re-runs the step after it) and before the task's soft time
    limit (which would interrupt the retries), less a margin."""
    now = timezone.now()
    lease_left = (
        (instance.locked_until - now).total_seconds()
        if instance.locked_until is not None
        else settings.NOTIFYFLOW_LEASE_S
    )
    soft_left = settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S - (now - started).total_seconds()
    return time.monotonic() + min(lease_left, soft_left) - RECORD_RETRY_MARGIN_S


def _record_reconnecting(
    record: Callable[[bool], bool], instance_id: uuid.UUID | str, *, deadline: float
) -> bool:
    """Run ``record(replay)``; if the connection dies, reconnect and run it again after
    each of RECORD_RETRY_DELAYS_S, then every last one of them until ``deadline``
    (``time.monotonic()``).

    Safe to repeat: the transition is fenced on the lease token and the delivery update
    on status 'sending', so they apply once; a replay writes the step log (and consumes
    an event, writes an outbox row) only together with the transition (had the first
    COMMIT landed after all, those rows exist). Raises the connection error when the
    database stays away past the deadline.
    """
    attempt = 0
    while True:
        try:
            return record(attempt > 0)
        except DATABASE_LOST as exc:
            pause = RECORD_RETRY_DELAYS_S[min(attempt, len(RECORD_RETRY_DELAYS_S) - 1)]
            # Each pause once at least (3.5 s: a terminated backend, a quick restart),
            # whatever the deadline; then on while the deadline allows.
            if attempt >= len(RECORD_RETRY_DELAYS_S) and time.monotonic() + pause >= deadline:
                raise
            logger.warning("step %s: outcome not recorded (%s); reconnecting", instance_id, exc)
        time.sleep(pause)
        connection.close()  # drop the dead connection; the next statement reconnects
        attempt += 1


def _step_log_insert(
    log: dict[str, Any],
    lost: dict[str, str],
    cancelled: dict[str, str],
    *,
    only_if_moved: bool = False,
) -> Statement:
    """INSERT of the step's log row for the transition statement; its error columns
    depend on whether the fenced transition applied (``moved`` is empty if not) and,
    if not, on whether the instance was cancelled meanwhile. With ``only_if_moved`` (a
    replay after a lost connection) the row is written only if the transition applied."""
    columns, selects, params = [], [], []
    conn = db.current()
    for name, field in _LOG_FIELDS.items():
        columns.append(f'"{field.column}"')
        if name in lost:
            selects.append(
                f"CASE WHEN EXISTS (SELECT 1 FROM moved) THEN %s WHEN {_CANCELLED_NOW}"
                " THEN %s ELSE %s END"
            )
            params += [log[name], log["trigger_id"], S.CANCELLED, cancelled[name], lost[name]]
        else:
            selects.append("%s")
            params.append(field.get_db_prep_save(log[name], conn))
    where = " WHERE EXISTS (SELECT 1 FROM moved)" if only_if_moved else ""
    return Statement(
        f'INSERT INTO "{StepExecutionLog._meta.db_table}" ({", ".join(columns)})'
        f" SELECT {', '.join(selects)}{where}",
        params,
    )


def _record(
    instance: TriggerInstance,
    lease: uuid.UUID,
    outcome: _Outcome,
    result: NodeResult | None,
    next_node: str | None,
    now: datetime,
    also: Sequence[Statement] = (),
    durable: bool = False,
) -> bool:
    if outcome.success:
        assert result is not None
        return _record_success(instance, lease, result, next_node, now, also, durable)
    return _record_failure(instance, lease, outcome, now, also, durable)


def _record_success(
    instance: TriggerInstance,
    lease: uuid.UUID,
    result: NodeResult,
    next_node: str | None,
    now: datetime,
    also: Sequence[Statement] = (),
    durable: bool = False,
) -> bool:
    if result.park_until is not None:
        until = result.park_until.isoformat()
        return state.requeue(
            instance_id=instance.pk,
            lease_token=lease,
            due=result.park_until,
            now=now,
            actor=ENGINE_ACTOR,
            reason=(
                f"node {instance.current_node_id} waits for event {result.wait_event!r} "
                f"until {until}"
                if result.wait_event is not None
                else f"node {instance.current_node_id} delays the end of the workflow until {until}"
            ),
            updates={
                "waiting_for_event": result.wait_event,
                "wait_deadline": result.park_until,
                "attempts": 0,
                "last_error": "",
            },
            also=also,
            durable=durable,
        )
    new_vars = dict(instance.vars)
    if result.vars_key:
        new_vars[result.vars_key] = result.output
    updates = {
        "vars": new_vars,
        "current_node_id": next_node,
        "attempts": 0,
        "last_error": "",
        "waiting_for_event": None,
        "wait_deadline": None,
    }
    if next_node is None:
        return state.transition(
            instance_id=instance.pk,
            from_status=S.PROCESSING,
            to_status=S.COMPLETED,
            reason=f"node {instance.current_node_id} done; end of workflow",
            actor=ENGINE_ACTOR,
            lease_token=lease,
            also=also,
            durable=durable,
            updates=updates,
        )
    return state.requeue(
        instance_id=instance.pk,
        lease_token=lease,
        due=result.resume_at or now,
        now=now,
        actor=ENGINE_ACTOR,
        reason=f"node {instance.current_node_id} done; next {next_node}",
        updates=updates,
        also=also,
        durable=durable,
    )


def _record_failure(
    instance: TriggerInstance,
    lease: uuid.UUID,
    outcome: _Outcome,
    now: datetime,
    also: Sequence[Statement] = (),
    durable: bool = False,
) -> bool:
    error = f"node {instance.current_node_id}: {outcome.error}"
    if outcome.defer_s is not None:
        # Not an attempt: the provider was never called (executions.channel_slots).
        outcome.then = f"not an attempt: runs again in {outcome.defer_s:g} s"
        return state.requeue(
            instance_id=instance.pk,
            lease_token=lease,
            due=now + timedelta(seconds=outcome.defer_s),
            now=now,
            actor=ENGINE_ACTOR,
            updates={"last_error": error},
            also=also,
            durable=durable,
            reason=f"deferred {outcome.defer_s:g} s: {error}",
        )
    decision = decide_retry(
        attempts_so_far=instance.attempts,
        permanent=outcome.permanent,
        now=now,
        policy=outcome.retry_policy,
    )
    updates = {"attempts": decision.attempts, "last_error": error}
    if decision.give_up:
        why = "permanent error" if outcome.permanent else "retries exhausted"
        outcome.then = f"instance failed: {why}"
        return state.transition(
            instance_id=instance.pk,
            from_status=S.PROCESSING,
            to_status=S.FAILED,
            reason=f"{why}: {error}",
            actor=ENGINE_ACTOR,
            lease_token=lease,
            also=also,
            durable=durable,
            updates=updates,
        )
    assert decision.retry_at is not None
    outcome.then = f"retry {decision.attempts} at {decision.retry_at.isoformat()}"
    moved = state.requeue(
        instance_id=instance.pk,
        lease_token=lease,
        due=decision.retry_at,
        now=now,
        actor=ENGINE_ACTOR,
        updates=updates,
        also=also,
        durable=durable,
        reason=f"retry {decision.attempts} scheduled: {error}",
    )
    if moved:
        metrics.RETRIES.labels("engine").inc()
    return moved


def _not_claimed(instance_id: uuid.UUID | str) -> str:
    """A message that claimed nothing: stale, duplicate, or early. Re-send an early one."""
    row = (
        TriggerInstance.objects.filter(pk=instance_id).values_list("status", "available_at").first()
    )
    if row is None:
        return "missing"
    status, available_at = row
    if status == S.ENQUEUED:
        wait = (available_at - timezone.now()).total_seconds()
        if 0 < wait <= settings.NOTIFYFLOW_BROKER_HORIZON_S:
            dispatch_on_commit(instance_id, countdown=wait)
            return "early"
    return f"skipped:{status}"


# --- the sweeper -----------------------------------------------------------------------


def sweep(*, now: datetime | None = None, batch: int | None = None) -> dict[str, int]:
    """Recover expired leases, re-dispatch due instances with no live message, and
    process emitted events whose after-commit processing was lost.

    Every query walks a partial index (status='processing' by locked_until,
    status='enqueued' by available_at, unprocessed outbox rows), so finished rows cost
    nothing.
    """
    now = now or timezone.now()
    batch = batch or settings.NOTIFYFLOW_SWEEP_BATCH
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S)
    return {
        "recovered": recover_expired_leases(now=now, batch=batch),
        "dispatched": redispatch_due(now=now, batch=batch),
        "outbox": outbox.outbox_process_pending(older_than=stale, batch=batch),
    }


def recover_expired_leases(*, now: datetime, batch: int) -> int:
    expired = list(
        TriggerInstance.objects.filter(status=S.PROCESSING, locked_until__lt=now)
        .order_by("locked_until")
        .select_related("workflow_version")
        .only(
            "id",
            "workflow_id",
            "workflow_version__version",
            "current_node_id",
            "attempts",
            "lease_token",
            "locked_by",
            "locked_until",
        )[:batch]
    )
    recovered = 0
    for instance in expired:
        assert instance.locked_until is not None  # processing rows always hold a lease
        decision = decide_retry(
            attempts_so_far=instance.attempts,
            permanent=False,
            now=now,
            immediate=True,
            policy=_node_retry_policy(instance),
        )
        error = (
            f"node {instance.current_node_id}: lease expired at "
            f"{instance.locked_until.isoformat()} (worker {instance.locked_by} lost)"
        )
        with transaction.atomic():
            if decision.give_up:
                ok = state.transition(
                    instance_id=instance.pk,
                    from_status=S.PROCESSING,
                    to_status=S.FAILED,
                    reason=f"retries exhausted: {error}",
                    actor="sweeper",
                    lease_token=instance.lease_token,
                    updates={"attempts": decision.attempts, "last_error": error},
                )
            else:
                ok = state.requeue(
                    instance_id=instance.pk,
                    lease_token=instance.lease_token,
                    due=now,
                    now=now,
                    actor="sweeper",
                    reason=f"lease recovered: {error}",
                    updates={"attempts": decision.attempts, "last_error": error},
                )
            if ok:
                recovered += 1
                metrics.SWEEPER.labels("lease").inc()
                if not decision.give_up:
                    metrics.RETRIES.labels("sweeper").inc()
                StepExecutionLog.objects.create(
                    trigger_id=instance.pk,
                    workflow_id=instance.workflow_id,
                    workflow_version=instance.workflow_version.version,
                    node_id=instance.current_node_id or "",
                    node_type="unknown",
                    attempt=decision.attempts,
                    started_at=instance.locked_until,
                    finished_at=now,
                    input_context={},
                    output={},
                    success=False,
                    error=error,
                    error_kind="lease_expired",
                    worker="sweeper",
                )
    return recovered


def _node_retry_policy(instance: TriggerInstance) -> dict[str, Any] | None:
    """The ``retry`` config of the instance's current node (versions are cached)."""
    try:
        definition = pinned_version(instance.workflow_version_id).definition
        return node_by_id(definition, instance.current_node_id or "")["config"].get("retry")
    except (KeyError, WorkflowVersion.DoesNotExist):
        return None


def redispatch_due(*, now: datetime, batch: int) -> int:
    """Send a message for due enqueued instances that have none in the broker: never
    dispatched (a long delay held in the database) or dispatched long enough ago that
    the message must be lost (broker flushed or restarted)."""
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S)
    # A paused workflow's instances wait for its resume, which dispatches them.
    enqueued = (
        TriggerInstance.objects.filter(status=S.ENQUEUED)
        .exclude(workflow__is_paused=True)
        .order_by("available_at")
    )
    # Two queries, each served by its own partial index, rather than one OR that would
    # read every due row: never dispatched (trigger_enqueued_undispatched), and
    # dispatched but still unclaimed long after it was due (trigger_due_enqueued).
    ids = list(
        enqueued.filter(dispatched_at__isnull=True, available_at__lte=now).values_list(
            "id", flat=True
        )[:batch]
    )
    if len(ids) < batch:
        ids += list(
            enqueued.filter(available_at__lte=stale, dispatched_at__lte=stale).values_list(
                "id", flat=True
            )[: batch - len(ids)]
        )
    if not ids:
        return 0
    with transaction.atomic():
        TriggerInstance.objects.filter(pk__in=ids, status=S.ENQUEUED).update(dispatched_at=now)
        dispatch_many_on_commit(ids)
    metrics.SWEEPER.labels("redispatch").inc(len(ids))
    return len(ids)
