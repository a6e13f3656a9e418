"""The execution engine: claim one instance, run its current node, record, advance.

Transactions are short and never span a provider call:
claim (tx) -> render + send (no tx) -> record outcome, fenced on the lease (tx) ->
after commit, enqueue the next step.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from triggers.models import TriggerInstance, TriggerStatus
from triggers.state import transition, transition_returning
from workflows.definition import node_by_id, outgoing_edges
from workflows.templating import TemplateError, condition_holds

from .deliveries import delivery_outcome_update, record_delivery
from .dispatch import dispatch_on_commit
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
# writes it again after these pauses (a few seconds: a terminated backend or a quick
# restart), so the message it sent is not sent again. Then it gives up; the task retries
# and the lease expires (the sweeper's path).
RECORD_RETRY_DELAYS_S = (0.0, 0.5, 1.0, 2.0)


@dataclass
class Claimed:
    instance: TriggerInstance
    version: PinnedVersion
    delivery_status: str | None
    delivery_output: dict[str, Any] | None


_INSTANCE_FIELDS = TriggerInstance._meta.concrete_fields
_CLAIM_SELECT = (
    "SELECT " + ", ".join(f"moved.{f.column}" for f in _INSTANCE_FIELDS)
    + ", d.status, d.output FROM moved LEFT JOIN executions_delivery d"
    " ON d.instance_id = moved.id AND d.node_id = moved.current_node_id"
)


def claim(*, instance_id: uuid.UUID | str, worker: str, now: datetime | None = None
          ) -> Claimed | None:
    """Atomically take an enqueued, due instance; None if it is not claimable.

    The conditional UPDATE re-checks status and due time, so any number of workers
    racing on one instance get exactly one winner; the row lock makes the losers wait
    and then see 0 rows. On PostgreSQL the claim, its audit row and the read of the
    row and of this node's delivery are one statement.
    """
    now = now or timezone.now()
    kwargs = dict(
        instance_id=instance_id, from_status=S.ENQUEUED, to_status=S.PROCESSING,
        reason="claimed", actor=worker or ENGINE_ACTOR, where={"available_at__lte": now},
        updates={"lease_token": uuid.uuid4(), "locked_by": worker[:200],
                 "locked_until": now + timedelta(seconds=settings.NOTIFYFLOW_LEASE_S)},
    )
    if connection.vendor == "postgresql":
        row = transition_returning(select=_CLAIM_SELECT, **kwargs)
        if row is None:
            return None
        values = [
            f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
            for f, v in zip(_INSTANCE_FIELDS, row, strict=False)
        ]
        instance = TriggerInstance.from_db("default", [f.attname for f in _INSTANCE_FIELDS],
                                           values)
        status, output = row[len(_INSTANCE_FIELDS):]
        output = Delivery._meta.get_field("output").from_db_value(output, None, connection)
    else:
        if not transition(**kwargs):
            return None
        instance = TriggerInstance.objects.get(pk=instance_id)
        delivery = (Delivery.objects.filter(instance_id=instance_id,
                                            node_id=instance.current_node_id)
                    .values_list("status", "output").first())
        status, output = delivery if delivery else (None, None)
    return Claimed(instance, pinned_version(instance.workflow_version_id), status, output)


def build_context(instance: TriggerInstance, version: PinnedVersion, now: datetime
                  ) -> dict[str, Any]:
    return {
        "payload": instance.payload,
        "trigger": {
            "id": str(instance.pk),
            "idempotency_key": instance.idempotency_key,
            "created_at": instance.created_at.isoformat(),
            "attempts": instance.attempts,
        },
        "workflow": {"key": version.workflow_key, "name": version.workflow_name,
                     "version": version.number},
        "vars": instance.vars,
        "now": now.isoformat(),
    }


def choose_next_node(definition: dict[str, Any], node_id: str, context: dict[str, Any]
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


def step_execute(*, instance_id: uuid.UUID | str, task_id: str = "", worker: str = "") -> str:
    """Execute the current node of one instance. Returns what happened (for logs)."""
    claimed = claim(instance_id=instance_id, worker=worker)
    if claimed is None:
        return _not_claimed(instance_id)
    instance, version = claimed.instance, claimed.version
    lease = instance.lease_token
    definition = version.definition
    node_id = instance.current_node_id
    started = timezone.now()
    context = build_context(instance, version, started)
    node: dict[str, Any] = {"id": node_id, "type": "unknown", "config": {}}
    result: NodeResult | None = None
    next_node: str | None = None
    step: StepContext | None = None
    try:
        node = node_by_id(definition, node_id)
        step = StepContext(instance_id=instance.pk, node_id=node_id, node_type=node["type"],
                           config=node["config"], context=context, now=started,
                           lease_token=lease, delivery_status=claimed.delivery_status,
                           delivery_output=claimed.delivery_output)
        result = EXECUTORS[node["type"]](step)
        new_vars = dict(instance.vars)
        if result.vars_key:
            new_vars[result.vars_key] = result.output
        next_node = choose_next_node(definition, node_id, {**context, "vars": new_vars})
        outcome = _Outcome(True, result.output)
    except ProviderError as exc:
        outcome = _Outcome(False, {}, str(exc), "permanent" if exc.permanent else "transient",
                           exc.permanent)
    except TemplateError as exc:
        outcome = _Outcome(False, {}, f"edge condition: {exc}", "permanent", True)
    except KeyError:
        outcome = _Outcome(False, {}, f"node {node_id!r} is not in version "
                           f"{version.number}", "permanent", True)
    except DATABASE_LOST as exc:
        # Lost before the provider call (the only statements of a node precede it):
        # nothing was sent. A transient failure like any other, recorded below.
        outcome = _Outcome(False, {}, f"database connection lost: {exc}", "transient")
    except Exception as exc:  # an unexpected bug: retry, bounded by attempts
        logger.exception("step %s:%s crashed", instance_id, node_id)
        outcome = _Outcome(False, {}, f"{exc.__class__.__name__}: {exc}", "transient")
    finished = timezone.now()

    log = dict(
        trigger_id=instance.pk, workflow_id=instance.workflow_id,
        workflow_version=version.number, node_id=node_id or "",
        node_type=node.get("type", "unknown"), attempt=instance.attempts + 1,
        started_at=started, finished_at=finished, input_context=context,
        output=outcome.output, success=outcome.success, error=outcome.error,
        error_kind=outcome.error_kind, task_id=task_id[:64], worker=worker[:200],
    )
    lost = {"error": (outcome.error + "; " if outcome.error else "")
            + "lease lost before the outcome was recorded; result discarded",
            "error_kind": "lease_lost"}
    if connection.vendor == "postgresql":
        def record(replay: bool) -> None:
            # The delivery's outcome, the step log, the instance's transition and its
            # audit row: one statement, one round trip, one commit.
            also = [_step_log_insert(log, lost, only_if_moved=replay)]
            if step is not None and step.pending_delivery:
                also.append(delivery_outcome_update(step))
            with transaction.atomic():
                # Durable whatever the session's setting (workers default to asynchronous
                # commit): a lost 'sent' record or advance would mean a duplicate send.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO on")
                _record(instance, lease, outcome, result, next_node, finished, also=also)

        _record_reconnecting(record, instance_id)
    else:
        with transaction.atomic():
            if step is not None:
                record_delivery(step)
            if not _record(instance, lease, outcome, result, next_node, finished):
                log.update(lost)
            StepExecutionLog.objects.create(**log)
    if not outcome.success:
        return f"failed:{outcome.error_kind}"
    return "advanced" if next_node else "completed"


_LOG_FIELDS = {f.attname: f for f in StepExecutionLog._meta.concrete_fields if not f.primary_key}


def _record_reconnecting(record: Any, instance_id: uuid.UUID | str) -> None:
    """Run ``record(replay)``; if the connection dies, reconnect and run it again.

    Safe to repeat: the transition is fenced on the lease token and the delivery update
    on status 'sending', so they apply once; a replay writes the step log only together
    with the transition (had the first COMMIT landed after all, the log row exists).
    Raises the connection error when the database stays away.
    """
    for attempt, pause in enumerate((None, *RECORD_RETRY_DELAYS_S)):
        if pause is not None:
            time.sleep(pause)
            connection.close()  # drop the dead connection; the next statement reconnects
        try:
            record(replay=attempt > 0)
            return
        except DATABASE_LOST as exc:
            if attempt == len(RECORD_RETRY_DELAYS_S):
                raise
            logger.warning("step %s: outcome not recorded (%s); reconnecting", instance_id,
                           exc)


def _step_log_insert(log: dict[str, Any], lost: dict[str, str], *, only_if_moved: bool = False
                     ) -> tuple[str, list[Any]]:
    """INSERT of the step's log row for the transition statement; its error columns
    depend on whether the fenced transition applied (``moved`` is empty if not). With
    ``only_if_moved`` (a replay) the row is written only if the transition applied."""
    columns, selects, params = [], [], []
    for name, field in _LOG_FIELDS.items():
        columns.append(f'"{field.column}"')
        if name in lost:
            selects.append("CASE WHEN EXISTS (SELECT 1 FROM moved) THEN %s ELSE %s END")
            params += [log[name], lost[name]]
        else:
            selects.append("%s")
            params.append(field.get_db_prep_save(log[name], connection))
    where = " WHERE EXISTS (SELECT 1 FROM moved)" if only_if_moved else ""
    return (f'INSERT INTO "{StepExecutionLog._meta.db_table}" ({", ".join(columns)})'
            f' SELECT {", ".join(selects)}{where}', params)


def _record(instance: TriggerInstance, lease: uuid.UUID, outcome: _Outcome,
            result: NodeResult | None, next_node: str | None, now: datetime,
            also: list[tuple[str, list[Any]]] | None = None) -> bool:
    if outcome.success:
        assert result is not None
        return _record_success(instance, lease, result, next_node, now, also=also)
    return _record_failure(instance, lease, outcome, now, also=also)


def _record_success(instance: TriggerInstance, lease: uuid.UUID, result: NodeResult,
                    next_node: str | None, now: datetime,
                    also: list[tuple[str, list[Any]]] | None = None) -> bool:
    new_vars = dict(instance.vars)
    if result.vars_key:
        new_vars[result.vars_key] = result.output
    if next_node is None:
        return transition(
            instance_id=instance.pk, from_status=S.PROCESSING, to_status=S.COMPLETED,
            reason=f"node {instance.current_node_id} done; end of workflow",
            actor=ENGINE_ACTOR, lease_token=lease, also=also,
            updates={"vars": new_vars, "current_node_id": None, "attempts": 0,
                     "last_error": ""},
        )
    due = result.resume_at or now
    return _requeue(instance, lease, due, now,
                    reason=f"node {instance.current_node_id} done; next {next_node}",
                    updates={"vars": new_vars, "current_node_id": next_node, "attempts": 0,
                             "last_error": ""}, also=also)


def _record_failure(instance: TriggerInstance, lease: uuid.UUID, outcome: _Outcome,
                    now: datetime, also: list[tuple[str, list[Any]]] | None = None) -> bool:
    decision = decide_retry(attempts_so_far=instance.attempts, permanent=outcome.permanent,
                            now=now)
    error = f"node {instance.current_node_id}: {outcome.error}"
    if decision.give_up:
        why = "permanent error" if outcome.permanent else "retries exhausted"
        return transition(
            instance_id=instance.pk, from_status=S.PROCESSING, to_status=S.FAILED,
            reason=f"{why}: {error}", actor=ENGINE_ACTOR, lease_token=lease, also=also,
            updates={"attempts": decision.attempts, "last_error": error},
        )
    return _requeue(instance, lease, decision.retry_at, now,
                    reason=f"retry {decision.attempts} scheduled: {error}",
                    updates={"attempts": decision.attempts, "last_error": error}, also=also)


def _requeue(instance: TriggerInstance, lease: uuid.UUID | None, due: datetime,
             now: datetime, *, reason: str, updates: dict[str, Any],
             also: list[tuple[str, list[Any]]] | None = None) -> bool:
    """processing -> enqueued at ``due``; the message goes to the broker after commit
    unless ``due`` is beyond the broker horizon, in which case the sweeper sends it."""
    countdown = (due - now).total_seconds()
    in_broker = countdown <= settings.NOTIFYFLOW_BROKER_HORIZON_S
    ok = transition(
        instance_id=instance.pk, from_status=S.PROCESSING, to_status=S.ENQUEUED,
        reason=reason, actor=ENGINE_ACTOR, lease_token=lease, also=also,
        updates={**updates, "available_at": due, "dispatched_at": now if in_broker else None},
    )
    if ok and in_broker:
        dispatch_on_commit(instance.pk, countdown=countdown)
    return ok


def _not_claimed(instance_id: uuid.UUID | str) -> str:
    """A message that claimed nothing: stale, duplicate, or early. Re-send an early one."""
    row = (TriggerInstance.objects.filter(pk=instance_id)
           .values_list("status", "available_at").first())
    if row is None:
        return "missing"
    status, available_at = row
    if status == S.ENQUEUED:
        wait = (available_at - timezone.now()).total_seconds()
        if 0 < wait <= settings.NOTIFYFLOW_BROKER_HORIZON_S:
            dispatch_on_commit(instance_id, countdown=wait)
            return "early"
    return f"skipped:{status}"


# --- operator actions (admin, API) -----------------------------------------------------

def instance_retry(*, instance_id: uuid.UUID | str, actor: str) -> bool:
    """failed -> enqueued now, attempts reset. The only way out of failed."""
    now = timezone.now()
    ok = transition(
        instance_id=instance_id, from_status=S.FAILED, to_status=S.ENQUEUED,
        reason="retried by operator", actor=actor,
        updates={"attempts": 0, "available_at": now, "dispatched_at": now,
                 "finished_at": None, "last_error": ""},
    )
    if ok:
        dispatch_on_commit(instance_id)
    return ok


def instance_run_now(*, instance_id: uuid.UUID | str, actor: str) -> bool:
    """Make a waiting (delayed or backing-off) enqueued instance due now."""
    now = timezone.now()
    with transaction.atomic():
        updated = TriggerInstance.objects.filter(
            pk=instance_id, status=S.ENQUEUED, available_at__gt=now
        ).update(available_at=now, dispatched_at=now, updated_at=now)
        if updated:
            from triggers.models import TriggerStatusChange

            # Not a status change, but an operator intervention worth the audit trail.
            TriggerStatusChange.objects.create(
                instance_id=instance_id, from_status=S.ENQUEUED, to_status=S.ENQUEUED,
                reason="run now (delay skipped) by operator", actor=actor,
            )
            dispatch_on_commit(instance_id)
    return bool(updated)


# --- the sweeper -----------------------------------------------------------------------

def sweep(*, now: datetime | None = None, batch: int | None = None) -> dict[str, int]:
    """Recover expired leases, then re-dispatch due instances with no live message.

    Both queries walk partial indexes (status='processing' by locked_until,
    status='enqueued' by available_at), so finished rows cost nothing.
    """
    now = now or timezone.now()
    batch = batch or settings.NOTIFYFLOW_SWEEP_BATCH
    return {"recovered": recover_expired_leases(now=now, batch=batch),
            "dispatched": redispatch_due(now=now, batch=batch)}


def recover_expired_leases(*, now: datetime, batch: int) -> int:
    expired = list(
        TriggerInstance.objects.filter(status=S.PROCESSING, locked_until__lt=now)
        .order_by("locked_until")
        .select_related("workflow_version")
        .only("id", "workflow_id", "workflow_version__version", "current_node_id",
              "attempts", "lease_token", "locked_by", "locked_until")[:batch]
    )
    recovered = 0
    for instance in expired:
        decision = decide_retry(attempts_so_far=instance.attempts, permanent=False, now=now,
                                immediate=True)
        error = (f"node {instance.current_node_id}: lease expired at "
                 f"{instance.locked_until.isoformat()} (worker {instance.locked_by} lost)")
        with transaction.atomic():
            if decision.give_up:
                ok = transition(
                    instance_id=instance.pk, from_status=S.PROCESSING, to_status=S.FAILED,
                    reason=f"retries exhausted: {error}", actor="sweeper",
                    lease_token=instance.lease_token,
                    updates={"attempts": decision.attempts, "last_error": error},
                )
            else:
                ok = _requeue(instance, instance.lease_token, now, now,
                              reason=f"lease recovered: {error}",
                              updates={"attempts": decision.attempts, "last_error": error})
            if ok:
                recovered += 1
                StepExecutionLog.objects.create(
                    trigger_id=instance.pk, workflow_id=instance.workflow_id,
                    workflow_version=instance.workflow_version.version,
                    node_id=instance.current_node_id or "", node_type="unknown",
                    attempt=decision.attempts, started_at=instance.locked_until, finished_at=now,
                    input_context={}, output={}, success=False, error=error,
                    error_kind="lease_expired", worker="sweeper",
                )
    return recovered


def redispatch_due(*, now: datetime, batch: int) -> int:
    """Send a message for due enqueued instances that have none in the broker: never
    dispatched (a long delay held in the database) or dispatched long enough ago that
    the message must be lost (broker flushed or restarted)."""
    stale = now - timedelta(seconds=settings.NOTIFYFLOW_REDISPATCH_AFTER_S)
    enqueued = TriggerInstance.objects.filter(status=S.ENQUEUED).order_by("available_at")
    # Two queries, each served by its own partial index, rather than one OR that would
    # read every due row: never dispatched (trigger_enqueued_undispatched), and
    # dispatched but still unclaimed long after it was due (trigger_due_enqueued).
    ids = list(enqueued.filter(dispatched_at__isnull=True, available_at__lte=now)
               .values_list("id", flat=True)[:batch])
    if len(ids) < batch:
        ids += list(enqueued.filter(available_at__lte=stale, dispatched_at__lte=stale)
                    .values_list("id", flat=True)[:batch - len(ids)])
    if not ids:
        return 0
    with transaction.atomic():
        TriggerInstance.objects.filter(pk__in=ids, status=S.ENQUEUED).update(dispatched_at=now)
        for instance_id in ids:
            dispatch_on_commit(instance_id)
    return len(ids)
