"""The transition a step's outcome leads to (the same for every recorder): advance,
park, complete, defer, retry or fail - each a fenced ``triggers.state`` call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from notifyflow import metrics
from status_webhooks import events as status_events
from status_webhooks.outbox import NewEvent
from triggers import state
from triggers.models import TriggerStatus

from ..retry_policy import decide_retry
from .base import StepRecord

S = TriggerStatus
ENGINE_ACTOR = "engine"


Sent = Sequence[tuple[NewEvent, str]]


def apply_outcome(
    rec: StepRecord,
    *,
    also: Sequence[state.Statement] = (),
    durable: bool = False,
    sent: Sent = (),
) -> bool:
    """Write the outcome's transition (``also``, ``durable`` and ``sent`` - its
    ``guarded_events`` - as for ``state.transition``) with the step's status events: a
    skip's ``step.skipped``, and ``instance.<status>`` when the instance ends. False if
    the fenced write did not apply (lease lost, or cancelled)."""
    if rec.outcome.success:
        return _success(rec, also, durable, sent)
    return _failure(rec, also, durable, sent)


def _skipped(rec: StepRecord) -> list[NewEvent]:
    if not rec.log.get("skip_reason"):
        return []
    rule = rec.result.output.get("rule") if rec.result is not None else None
    return [
        status_events.step_skipped(
            instance_id=rec.instance.pk,
            workflow_key=rec.workflow_key,
            node_id=rec.log["node_id"],
            node_type=rec.log["node_type"],
            reason=rec.log["skip_reason"],
            rule=rule if isinstance(rule, str) else None,
        )
    ]


def _finished(rec: StepRecord, status: str, reason: str) -> NewEvent:
    instance = rec.instance
    return status_events.instance_finished(
        instance_id=instance.pk,
        workflow_key=rec.workflow_key,
        idempotency_key=instance.idempotency_key,
        recipient_id=instance.recipient_id,
        status=status,
        reason=reason,
    )


def _success(rec: StepRecord, also: Sequence[state.Statement], durable: bool, sent: Sent) -> bool:
    instance, result, node = rec.instance, rec.result, rec.instance.current_node_id
    assert result is not None
    if result.park_until is not None:
        return _park(rec, also, durable, sent)
    new_vars = dict(instance.vars)
    if result.vars_key:
        new_vars[result.vars_key] = result.output
    updates = {
        "vars": new_vars,
        "current_node_id": rec.next_node,
        "attempts": 0,
        "last_error": "",
        "waiting_for_event": None,
        "wait_deadline": None,
        "parked_on": "",
    }
    if rec.next_node is None:
        reason = f"node {node} done; end of workflow"
        return state.transition(
            instance_id=instance.pk,
            from_status=S.PROCESSING,
            to_status=S.COMPLETED,
            reason=reason,
            actor=ENGINE_ACTOR,
            lease_token=rec.lease,
            also=also,
            durable=durable,
            updates=updates,
            guarded_events=sent,
            events=[*_skipped(rec), _finished(rec, S.COMPLETED, reason)],
        )
    # The routine release: the step log is its record, no audit row.
    return state.requeue(
        instance_id=instance.pk,
        lane=instance.lane,
        lease_token=rec.lease,
        due=result.resume_at or rec.finished,
        now=rec.finished,
        actor=ENGINE_ACTOR,
        reason=f"node {node} done; next {rec.next_node}",
        updates=updates,
        also=also,
        durable=durable,
        guarded_events=sent,
        events=_skipped(rec),
        audited=False,
    )


def _park(rec: StepRecord, also: Sequence[state.Statement], durable: bool, sent: Sent) -> bool:
    """Stay at this node until ``park_until`` (or until woken): a wait for an event, a
    delay at the end of the workflow, or a gate (``park_on``)."""
    instance, result, node = rec.instance, rec.result, rec.instance.current_node_id
    assert result is not None and result.park_until is not None
    until = result.park_until.isoformat()
    if result.wait_event is not None:
        reason = f"node {node} waits for event {result.wait_event!r} until {until}"
    elif result.park_on:
        reason = f"node {node} parked on its {result.park_on.replace('_', ' ')} until {until}"
    else:
        reason = f"node {node} delays the end of the workflow until {until}"
    updates: dict[str, object] = {
        "waiting_for_event": result.wait_event,
        "wait_deadline": result.park_until,
        "parked_on": result.park_on,
        "attempts": 0,
        "last_error": "",
    }
    if result.vars_key:
        updates["vars"] = {**instance.vars, result.vars_key: result.output}
    return state.requeue(
        instance_id=instance.pk,
        lane=instance.lane,
        lease_token=rec.lease,
        due=result.park_until,
        now=rec.finished,
        actor=ENGINE_ACTOR,
        reason=reason,
        updates=updates,
        also=also,
        durable=durable,
        guarded_events=sent,
        events=_skipped(rec),
    )


def _failure(rec: StepRecord, also: Sequence[state.Statement], durable: bool, sent: Sent) -> bool:
    instance, outcome, now = rec.instance, rec.outcome, rec.finished
    error = f"node {instance.current_node_id}: {outcome.error}"
    if outcome.defer_s is not None:
        # Not an attempt: the provider was never called (executions.channel_slots).
        outcome.then = f"not an attempt: runs again in {outcome.defer_s:g} s"
        return state.requeue(
            instance_id=instance.pk,
            lane=instance.lane,
            lease_token=rec.lease,
            due=now + timedelta(seconds=outcome.defer_s),
            now=now,
            actor=ENGINE_ACTOR,
            updates={"last_error": error, "parked_on": ""},
            also=also,
            durable=durable,
            guarded_events=sent,
            reason=f"deferred {outcome.defer_s:g} s: {error}",
        )
    decision = decide_retry(
        attempts_so_far=instance.attempts,
        permanent=outcome.permanent,
        now=now,
        policy=outcome.retry_policy,
        retry_after_s=outcome.retry_after_s,
    )
    updates = {"attempts": decision.attempts, "last_error": error, "parked_on": ""}
    if decision.give_up:
        why = "permanent error" if outcome.permanent else "retries exhausted"
        outcome.then = f"instance failed: {why}"
        # Not the error's text: a provider's message may quote an address.
        reported = f"{why} at node {instance.current_node_id} ({outcome.error_kind})"
        return state.transition(
            instance_id=instance.pk,
            from_status=S.PROCESSING,
            to_status=S.FAILED,
            reason=f"{why}: {error}",
            actor=ENGINE_ACTOR,
            lease_token=rec.lease,
            also=also,
            durable=durable,
            updates=updates,
            guarded_events=sent,
            events=[_finished(rec, S.FAILED, reported)],
        )
    assert decision.retry_at is not None
    outcome.then = f"retry {decision.attempts} at {decision.retry_at.isoformat()}"
    moved = state.requeue(
        instance_id=instance.pk,
        lane=instance.lane,
        lease_token=rec.lease,
        due=decision.retry_at,
        now=now,
        actor=ENGINE_ACTOR,
        updates=updates,
        also=also,
        durable=durable,
        guarded_events=sent,
        reason=f"retry {decision.attempts} scheduled: {error}",
    )
    if moved:
        metrics.RETRIES.labels("engine").inc()
    return moved
