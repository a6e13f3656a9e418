"""The execution engine: claim one instance, run its current node, record, advance.

``step_execute`` reads as its four phases: claim (short, ``recording``) -> run the node
(render + send, no transaction) -> record the outcome, fenced on the lease
(``recording``: one implementation per database) -> after commit, the next step's
message, and what the node asked to do once committed (``NodeResult.after_commit``).
"""

from __future__ import annotations

import logging
import random
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from notifyflow import db, logs, metrics
from notifyflow.redaction import redact
from triggers import stale_messages
from triggers.dispatch import dispatch_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from workflows.definition import node_by_id, node_types, outgoing_edges
from workflows.templating import TemplateError, condition_holds

from . import audience as audiences
from .channel_slots import ChannelBusy
from .erasure import scrub_fenced_step
from .locales import LOCALE_NAMES, locale_scope, send_locale, translation_output
from .nodes import NodeResult, StepContext
from .outcomes import StepOutcome
from .providers.base import ProviderError
from .recording import RECORDER, Claimed, Outcome, StepRecord
from .step import NO_AUDIENCE, NO_RECIPIENT, Audience, DeliveryState
from .versions import PinnedVersion

logger = logging.getLogger("notifyflow.engine")
S = TriggerStatus

# Re-exported for the tasks: what a lost database connection raises.
DATABASE_LOST = db.DATABASE_LOST


def claim(
    *, instance_id: uuid.UUID | str, worker: str, now: datetime | None = None
) -> Claimed | None:
    """Claim an enqueued, due instance (``triggers.state.claim``) with what the step needs
    to run: its pinned version and this node's delivery record. None if not claimable."""
    return RECORDER.claim(instance_id=instance_id, worker=worker, now=now or timezone.now())


def build_context(
    instance: TriggerInstance,
    version: PinnedVersion,
    now: datetime,
    audience: Audience = NO_AUDIENCE,
    unsubscribe_url: str | None = None,
) -> dict[str, Any]:
    """What templates see: also ``recipient`` (as its row reads now; all empty without
    one) and ``unsubscribe_url`` (a non-critical workflow's, with a recipient; else "")."""
    context = {
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
    person = audience.recipient
    context["recipient"] = person.as_context() if person is not None else NO_RECIPIENT
    context["unsubscribe_url"] = unsubscribe_url or ""
    return context


# What a step log holds instead of the payload: the instance keeps it once.
PAYLOAD_REF = {"$ref": "instance.payload"}


def logged_context(context: dict[str, Any]) -> dict[str, Any]:
    """The context as a step log keeps it: the payload by reference, unless
    NOTIFYFLOW_STEP_LOG_FULL_CONTEXT asks for a snapshot (then with the redaction paths
    masked)."""
    logged = {**context, "payload": PAYLOAD_REF}
    if settings.NOTIFYFLOW_STEP_LOG_FULL_CONTEXT:
        logged["payload"] = redact(context["payload"])
    # The person by reference, never their data (erasure must leave none); the
    # unsubscribe link is theirs too.
    person_id = (context.get("recipient") or {}).get("id")
    logged.pop("unsubscribe_url", None)
    logged.pop("recipient", None)
    for name in LOCALE_NAMES:  # the output names the locale a step rendered in
        logged.pop(name, None)
    if person_id is not None:
        logged["recipient"] = {"$ref": "recipient", "id": person_id}
    return logged


def choose_next_node(
    definition: dict[str, Any], node_id: str, context: dict[str, Any]
) -> str | None:
    """The first outgoing edge whose condition holds (or that has none); None = end."""
    for edge in outgoing_edges(definition, node_id):
        condition = edge.get("condition")
        if condition is None or condition_holds(condition, context):
            return edge["to"]
    return None


def step_execute(
    *, instance_id: uuid.UUID | str, task_id: str = "", worker: str = ""
) -> StepOutcome:
    """Execute the current node of one instance. Returns what happened (for logs).

    Logs one line per step carrying trigger_id, workflow, node_id and attempt (and the
    task's task_id and request_id, bound by executions.worker_hooks)."""
    with logs.bound(task_id=task_id, trigger_id=str(instance_id)):
        outcome = _step(instance_id, task_id, worker)
        if not outcome.is_failure:  # a failure has its WARNING line already
            logger.info("step %s", outcome)
        return outcome


def _step(instance_id: uuid.UUID | str, task_id: str, worker: str) -> StepOutcome:
    claimed = claim(instance_id=instance_id, worker=worker)
    if claimed is None:
        return _not_claimed(instance_id)
    rec = _run(claimed, task_id, worker)
    recorded = RECORDER.record(rec)
    if recorded and rec.result is not None:
        if rec.result.after_commit is not None:
            rec.result.after_commit()
    elif not recorded:
        # Fenced out: cancelled meanwhile - by an erasure of its recipient, the step
        # wrote the addresses it had read after the erasure's scrub (one read, only on
        # this rare path).
        scrub_fenced_step(
            instance_id=rec.instance.pk,
            idempotency_key=rec.instance.idempotency_key,
            recipient=claimed.audience.recipient,
            secrets=rec.step.delivery.secrets if rec.step is not None else (),
        )
    return _report(rec, recorded)


def _run(claimed: Claimed, task_id: str, worker: str) -> StepRecord:
    """Run the claimed instance's current node (no transaction open): what to record."""
    instance, version = claimed.instance, claimed.version
    lease = instance.lease_token
    assert lease is not None  # a claimed row always has a lease (database CHECK)
    node_id = instance.current_node_id or ""
    logs.bind(workflow=version.workflow_key, node_id=node_id, attempt=instance.attempts + 1)
    started = timezone.now()
    audience = claimed.audience
    unsubscribe_url = audiences.link(audience, workflow_key=version.workflow_key)
    context = build_context(instance, version, started, audience, unsubscribe_url)
    locale = send_locale(audience, instance.locale)  # a test send's locale first
    context.update(locale_scope(audience, workflow_key=version.workflow_key, locale=locale))
    step: StepContext | None = None
    result: NodeResult | None = None
    next_node: str | None = None
    try:
        node = node_by_id(version.definition, node_id)
    except KeyError:
        node = {"id": node_id, "type": "unknown", "config": {}}
        outcome = Outcome(
            False, {}, f"node {node_id!r} is not in version {version.number}", "permanent", True
        )
    else:
        step = StepContext(
            instance=instance,
            node_id=node_id,
            node_type=node["type"],
            config=node["config"],
            context=context,
            now=started,
            audience=audience,
            workflow_key=version.workflow_key,
            delivery=DeliveryState(claimed.delivery_status, claimed.delivery_output),
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
        output=translation_output(context, outcome.output, step),
        success=outcome.success,
        error=outcome.error,
        error_kind=outcome.error_kind,
        task_id=task_id[:64],
        worker=worker[:200],
        # A wait with no event yet, a delay at the end, a gate: parked here, not an
        # attempt - unless it is the node's outcome (a batch member: skipped, batched).
        parked=result is not None and result.park_until is not None and not result.skip_reason,
        skip_reason=(result.skip_reason if result is not None and outcome.success else ""),
    )
    return StepRecord(
        instance,
        lease,
        started,
        finished,
        outcome,
        step,
        result,
        next_node,
        log,
        version.workflow_key,
    )


def _report(rec: StepRecord, recorded: bool) -> StepOutcome:
    """Metrics, the failure's WARNING line, and what the step returns."""
    outcome, node_type = rec.outcome, rec.log["node_type"]
    metrics.STEPS.labels(node_type, "success" if outcome.success else outcome.error_kind).inc()
    metrics.STEP_SECONDS.labels(node_type).observe((rec.finished - rec.started).total_seconds())
    if rec.log["skip_reason"]:
        metrics.STEPS_SKIPPED.labels(rec.log["skip_reason"]).inc()
    if not outcome.success:
        # Why, where and what next, at WARNING: the line an operator looks for.
        logger.warning(
            "step failed:%s instance %s node %s attempt %d: %s%s",
            outcome.error_kind,
            rec.instance.pk,
            rec.log["node_id"],
            rec.instance.attempts + 1,
            outcome.error,
            f" ({outcome.then})" if recorded and outcome.then else "",
        )
        return StepOutcome.failed(outcome.error_kind)
    if rec.result is not None and rec.result.park_until is not None:
        return StepOutcome.WAITING
    return StepOutcome.ADVANCED if rec.next_node else StepOutcome.COMPLETED


def _run_node(
    step: StepContext, definition: dict[str, Any], current_vars: dict[str, Any]
) -> tuple[Outcome, NodeResult | None, str | None]:
    """Run the node's executor and choose the next node; classify any failure."""
    try:
        result = node_types.get(step.node_type).run(step)
        if result.park_until is not None:  # parked: stay at this node
            return Outcome(True, result.output), result, step.node_id
        if result.end:  # the node ends the path
            return Outcome(True, result.output), result, None
        new_vars = dict(current_vars)
        if result.vars_key:
            new_vars[result.vars_key] = result.output
        next_node = choose_next_node(definition, step.node_id, {**step.context, "vars": new_vars})
        if next_node is None and result.resume_at is not None and result.resume_at > step.now:
            # Due later at the end of the workflow (a delay there): nothing to advance to,
            # so it parks at its own node until then; the instance completes when it
            # runs there again.
            result.park_until = result.resume_at
            return Outcome(True, result.output), result, step.node_id
    except ChannelBusy as exc:
        return Outcome(False, {}, str(exc), "deferred", defer_s=exc.retry_after_s), None, None
    except ProviderError as exc:
        kind = "permanent" if exc.permanent else "transient"
        failed = Outcome(False, {}, str(exc), kind, exc.permanent, retry_after_s=exc.retry_after_s)
        return failed, None, None
    except TemplateError as exc:
        return Outcome(False, {}, f"edge condition: {exc}", "permanent", True), None, None
    except DATABASE_LOST as exc:
        # Lost before the provider call (a node's statements precede it): nothing was
        # sent. A transient failure like any other, recorded by the caller.
        return Outcome(False, {}, f"database connection lost: {exc}", "transient"), None, None
    except Exception as exc:  # an unexpected bug: retry, bounded by attempts
        logger.exception("step %s:%s crashed", step.instance_id, step.node_id)
        return (Outcome(False, {}, f"{exc.__class__.__name__}: {exc}", "transient"), None, None)
    return Outcome(True, result.output), result, next_node


def _not_claimed(instance_id: uuid.UUID | str) -> StepOutcome:
    """A message that claimed nothing: stale, duplicate, early, or held back by its
    workflow's concurrency limit. Re-send an early or held-back one."""
    row = (
        TriggerInstance.objects.filter(pk=instance_id)
        .values_list(
            "status",
            "available_at",
            "lane",
            "concurrency_key",
            "workflow__is_paused",
            "workflow__key",
        )
        .first()
    )
    if row is None:
        return StepOutcome.MISSING
    status, available_at, lane, concurrency_key, paused, workflow = row
    if status == S.ENQUEUED:
        wait = (available_at - timezone.now()).total_seconds()
        if 0 < wait <= settings.NOTIFYFLOW_BROKER_HORIZON_S:
            dispatch_on_commit(instance_id, lane=lane, countdown=wait)
            return StepOutcome.EARLY
        if wait <= 0 and concurrency_key is not None and not paused:
            return _deferred(instance_id, workflow, concurrency_key, lane)
    elif status == S.CANCELLED:
        # Likely one of many (a cancelled fan-out): they go in bulk (stale_messages).
        stale_messages.message_of_cancelled_instance(lane=lane)
    return StepOutcome.skipped(status)


# A claim refused by the concurrency limit: its message comes back after a random pause
# in this range. The instance stays enqueued and due, no attempt spent; only its
# ``dispatched_at`` is stamped, so the sweeper knows a message is on its way (without
# it, every NOTIFYFLOW_REDISPATCH_AFTER_S would add one more message circling for each
# waiting instance) and still re-sends one that is lost. Why a
# timed retry rather than a hand-off from the step that frees a slot: a hand-off needs
# an index of the waiting instances per (workflow, key) and its own message, which can
# be lost or arrive before the freeing step commits, so the retry would be needed
# anyway; the jitter spreads the waiting messages so that a freed slot is taken within
# about half a second. Its cost is one refused claim (a primary-key UPDATE that finds
# the key full) per waiting instance per pause: a deep backlog behind a small limit
# keeps the workers polling - raise the limit, or keep such work in its own lane.
CONCURRENCY_RETRY_S = (0.2, 1.0)


def _deferred(
    instance_id: uuid.UUID | str, workflow: str, concurrency_key: str, lane: str
) -> StepOutcome:
    countdown = random.uniform(*CONCURRENCY_RETRY_S)
    logger.debug(
        "step %s deferred: concurrency key %r is at its limit; again in %.2fs",
        instance_id,
        concurrency_key,
        countdown,
    )
    metrics.CONCURRENCY_DEFERRED.labels(workflow).inc()
    TriggerInstance.objects.filter(pk=instance_id, status=S.ENQUEUED).update(
        dispatched_at=timezone.now()
    )
    dispatch_on_commit(instance_id, lane=lane, countdown=countdown)
    return StepOutcome.DEFERRED_CONCURRENCY
