"""The transition a step's outcome leads to (the same for every recorder): advance,
park, complete, defer, retry or fail - each a fenced ``triggers.state`` call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from notifyflow import metrics
from triggers import state
from triggers.models import TriggerStatus

from ..retry_policy import decide_retry
from .base import StepRecord

S = TriggerStatus
ENGINE_ACTOR = "engine"


def apply_outcome(
    rec: StepRecord, *, also: Sequence[state.Statement] = (), durable: bool = False
) -> bool:
    """Write the outcome's transition (``also`` and ``durable``: ``state.transition``).
    False if the fenced write did not apply (lease lost, or cancelled)."""
    if rec.outcome.success:
        return _success(rec, also, durable)
    return _failure(rec, also, durable)


def _success(rec: StepRecord, also: Sequence[state.Statement], durable: bool) -> bool:
    instance, result, node = rec.instance, rec.result, rec.instance.current_node_id
    assert result is not None
    if result.park_until is not None:
        return _park(rec, also, durable)
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
        return state.transition(
            instance_id=instance.pk,
            from_status=S.PROCESSING,
            to_status=S.COMPLETED,
            reason=f"node {node} done; end of workflow",
            actor=ENGINE_ACTOR,
            lease_token=rec.lease,
            also=also,
            durable=durable,
            updates=updates,
        )
    return state.requeue(
        instance_id=instance.pk,
        lease_token=rec.lease,
        due=result.resume_at or rec.finished,
        now=rec.finished,
        actor=ENGINE_ACTOR,
        reason=f"node {node} done; next {rec.next_node}",
        updates=updates,
        also=also,
        durable=durable,
    )


def _park(rec: StepRecord, also: Sequence[state.Statement], durable: bool) -> bool:
    """Stay at this node until ``park_until`` (or until woken): a wait for an event, a
    delay at the end of the workflow, or a gate (``park_on``, SPEC §13)."""
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
        lease_token=rec.lease,
        due=result.park_until,
        now=rec.finished,
        actor=ENGINE_ACTOR,
        reason=reason,
        updates=updates,
        also=also,
        durable=durable,
    )


def _failure(rec: StepRecord, also: Sequence[state.Statement], durable: bool) -> bool:
    instance, outcome, now = rec.instance, rec.outcome, rec.finished
    error = f"node {instance.current_node_id}: {outcome.error}"
    if outcome.defer_s is not None:
        # Not an attempt: the provider was never called (executions.channel_slots).
        outcome.then = f"not an attempt: runs again in {outcome.defer_s:g} s"
        return state.requeue(
            instance_id=instance.pk,
            lease_token=rec.lease,
            due=now + timedelta(seconds=outcome.defer_s),
            now=now,
            actor=ENGINE_ACTOR,
            updates={"last_error": error, "parked_on": ""},
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
    updates = {"attempts": decision.attempts, "last_error": error, "parked_on": ""}
    if decision.give_up:
        why = "permanent error" if outcome.permanent else "retries exhausted"
        outcome.then = f"instance failed: {why}"
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
        )
    assert decision.retry_at is not None
    outcome.then = f"retry {decision.attempts} at {decision.retry_at.isoformat()}"
    moved = state.requeue(
        instance_id=instance.pk,
        lease_token=rec.lease,
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
