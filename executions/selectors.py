"""Reads that span an instance and what happened inside its steps (the API's timeline
and stats). Selectors return plain data; they never write."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet

from notifyflow.errors import NotFoundError
from triggers.models import GATES, TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import InboxEvent
from triggers.selectors import instance_or_404
from workflows.models import Workflow

from .history import HISTORY_STEP_FIELDS, StatusChangeEntry, status_history
from .models import StepExecutionLog

S = TriggerStatus


@dataclass(frozen=True)
class Pending:
    """The work an unfinished instance has ahead of it: the node it runs next (or runs
    now, when processing), its type in the pinned version, and when it is due."""

    node_id: str
    node_type: str
    due_at: datetime
    # {kind, event, deadline} while parked at its node: a wait for an event (kind
    # "event"), or a gate ("batch", "throttle", "send_window"); None when it
    # waits only for time.
    waiting_for: dict[str, Any] | None = None


@dataclass(frozen=True)
class Timeline:
    instance: TriggerInstance
    # Every status change: audit rows merged with the step logs' claims and
    # routine releases (executions.history).
    history: list[StatusChangeEntry]
    steps: list[StepExecutionLog]
    # Events delivered to the instance, oldest first, consumed or pending.
    inbox: list[dict[str, Any]]
    pending: Pending | None


def instance_timeline(*, instance_id: uuid.UUID | str) -> Timeline:
    """Where an instance is, what happened to it and what it waits for, in four queries
    whatever its history's length: the instance (with its workflow and pinned version),
    its status changes (creation included), its step logs and its inbox, each oldest
    first. The history merges the audit rows with the claims and routine releases the
    step logs record (``history.status_history``): every change is listed.

    Raises NotFoundError for an unknown instance.
    """
    instance = instance_or_404(instance_id)
    # status_change_instance_at and steplog_trigger_started serve these two.
    changes = list(TriggerStatusChange.objects.filter(instance=instance).order_by("at", "id"))
    steps = list(
        StepExecutionLog.objects.filter(trigger=instance)
        .select_related("workflow")
        .order_by("started_at", "id")
    )
    # inbox_event_once (instance, event_id) leads with the instance: an index range.
    inbox = [
        {
            "name": event.name,
            "event_id": event.event_id,
            "context": event.context,
            "received_at": event.received_at,
            "consumed_at": event.consumed_at,
            "consumed_by_node": event.consumed_by_node or None,
        }
        for event in InboxEvent.objects.filter(instance=instance).order_by("received_at", "id")
    ]
    history = status_history(instance=instance, changes=changes, steps=steps)
    return Timeline(
        instance=instance, history=history, steps=steps, inbox=inbox, pending=_pending(instance)
    )


def instance_status_history(*, instance: TriggerInstance) -> list[StatusChangeEntry]:
    """Every status change of ``instance``, oldest first (``history.status_history``):
    two queries, its audit rows (status_change_instance_at) and the step-log columns
    the merge reads (steplog_trigger_started)."""
    changes = TriggerStatusChange.objects.filter(instance=instance).order_by("at", "id")
    steps = (
        StepExecutionLog.objects.filter(trigger=instance)
        .order_by("started_at", "id")
        .only(*HISTORY_STEP_FIELDS)
    )
    return status_history(instance=instance, changes=list(changes), steps=list(steps))


def _pending(instance: TriggerInstance) -> Pending | None:
    if instance.is_terminal or instance.current_node_id is None:
        return None
    node_type = next(
        (
            str(node.get("type"))
            for node in instance.workflow_version.definition.get("nodes", [])
            if node.get("id") == instance.current_node_id
        ),
        # A cursor outside its version fails when it runs (engine); say so meanwhile.
        "unknown",
    )
    waiting_for = None
    if instance.status == S.ENQUEUED and instance.waiting_for_event:
        waiting_for = {
            "kind": "event",
            "event": instance.waiting_for_event,
            "deadline": instance.wait_deadline,
        }
    elif instance.status == S.ENQUEUED and instance.parked_on in GATES:
        deadline = instance.wait_deadline
        waiting_for = {"kind": instance.parked_on, "event": None, "deadline": deadline}
    return Pending(
        node_id=instance.current_node_id,
        node_type=node_type,
        due_at=instance.available_at,
        waiting_for=waiting_for,
    )


def node_reached_at(*, instance_id: uuid.UUID, node_id: str) -> datetime | None:
    """When the instance reached ``node_id``: its first step log there (a definition is
    acyclic, so a node is reached once). None if no step ran there yet. Served by
    steplog_trigger_started (the instance's logs in start order)."""
    return (
        StepExecutionLog.objects.filter(trigger_id=instance_id, node_id=node_id)
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first()
    )


def step_counts_by_node(*, workflow_id: int) -> QuerySet:
    """``(node_id, success, count)`` of a workflow's step executions. Parking rows (a
    wait or a delay at the end, parked at its node) are not executions: the row that
    resolves the node later is. Grouped by (node_id, success) with COUNT(*): every
    column read is in the partial index steplog_workflow_node_success, so PostgreSQL
    answers with an index-only scan in index order."""
    return (
        StepExecutionLog.objects.filter(workflow_id=workflow_id, parked=False)
        .order_by()
        .values_list("node_id", "success")
        .annotate(n=Count("*"))
    )


@dataclass(frozen=True)
class NodeStats:
    node_id: str
    executions: int
    successes: int
    failures: int


@dataclass(frozen=True)
class WorkflowStats:
    instances: dict[str, int]
    nodes: list[NodeStats]


def workflow_stats(*, key: str) -> WorkflowStats:
    """Instances per status and, per node id, step executions with their successes and
    failures, over every version of the workflow (its observed transitions). Test
    sends (``is_test``) are left out.

    Nodes come in the current definition's order, then nodes only older versions had.
    Two aggregate queries, each answered from an index alone (no table rows read):
    trigger_workflow_status for the instances, steplog_workflow_node_success for the
    step logs (bench/RESULTS.md, "Workflow stats at 1M step logs"). Raises
    NotFoundError for an unknown workflow.
    """
    workflow = Workflow.objects.select_related("current_version").filter(key=key).first()
    if workflow is None:
        raise NotFoundError(code="not_found", field=None, message=f"no workflow with key {key!r}")
    instances = dict.fromkeys(TriggerStatus.values, 0)
    for status, count in (
        TriggerInstance.objects.filter(workflow=workflow)
        .order_by()
        .values_list("status")
        .annotate(n=Count("*"))
    ):
        instances[status] = count
    per_node: dict[str, list[int]] = {}
    for node_id, success, count in step_counts_by_node(workflow_id=workflow.pk):
        totals = per_node.setdefault(node_id, [0, 0])
        totals[0] += count
        totals[1] += count if success else 0
    _subtract_test_sends(workflow.pk, instances, per_node)
    order = [str(n.get("id")) for n in (workflow.definition or {}).get("nodes", [])]
    order += sorted(set(per_node) - set(order))
    return WorkflowStats(
        instances=instances,
        nodes=[
            NodeStats(node_id, n, ok, n - ok)
            for node_id in order
            for n, ok in [per_node.get(node_id, [0, 0])]
        ],
    )


def _subtract_test_sends(
    workflow_id: int, instances: dict[str, int], per_node: dict[str, list[int]]
) -> None:
    """Take the workflow's test sends out of its counts. Subtracted rather than
    filtered, so the two counts above stay index-only scans: the test instances come
    from the small partial index trigger_test_workflow_status, their step logs from
    steplog_trigger_started."""
    tests = TriggerInstance.objects.filter(workflow_id=workflow_id, is_test=True).order_by()
    by_status = list(tests.values_list("status").annotate(n=Count("*")))
    for status, count in by_status:
        instances[status] -= count
    if not by_status:
        return  # the usual case: one query more, not two
    test_steps = (
        StepExecutionLog.objects.filter(trigger_id__in=tests.values("pk"), parked=False)
        .order_by()
        .values_list("node_id", "success")
        .annotate(n=Count("*"))
    )
    for node_id, success, count in test_steps:
        totals = per_node.get(node_id)
        if totals is not None:
            totals[0] -= count
            totals[1] -= count if success else 0
