"""Reads that span an instance and what happened inside its steps (the API's timeline
and stats). Selectors return plain data; they never write."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from notifyflow.errors import NotFoundError
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange

from .models import StepExecutionLog

S = TriggerStatus


@dataclass(frozen=True)
class Pending:
    """The work an unfinished instance has ahead of it: the node it runs next (or runs
    now, when processing), its type in the pinned version, and when it is due."""

    node_id: str
    node_type: str
    due_at: datetime
    # {event, deadline} once an instance can wait for an event (the running-instances
    # issue adds wait nodes); until then nothing waits for anything but time.
    waiting_for: dict[str, Any] | None = None


@dataclass(frozen=True)
class Timeline:
    instance: TriggerInstance
    history: list[TriggerStatusChange]
    steps: list[StepExecutionLog]
    # Events delivered to the instance (the running-instances issue adds the inbox);
    # empty until then, so clients can rely on the shape of SPEC §9 now.
    inbox: list[dict[str, Any]]
    pending: Pending | None


def instance_timeline(*, instance_id: uuid.UUID | str) -> Timeline:
    """Where an instance is, what happened to it and what it waits for, in three queries
    whatever its history's length: the instance (with its workflow and pinned version),
    its status changes (creation included) and its step logs, each oldest first.

    Raises NotFoundError for an unknown instance.
    """
    instance = (
        TriggerInstance.objects.select_related("workflow", "workflow_version")
        .filter(pk=instance_id)
        .first()
    )
    if instance is None:
        raise NotFoundError(code="not_found", field=None, message="no such trigger instance")
    # status_change_instance_at and steplog_trigger_started serve these two.
    history = list(TriggerStatusChange.objects.filter(instance=instance).order_by("at", "id"))
    steps = list(
        StepExecutionLog.objects.filter(trigger=instance)
        .select_related("workflow")
        .order_by("started_at", "id")
    )
    return Timeline(
        instance=instance, history=history, steps=steps, inbox=[], pending=_pending(instance)
    )


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
    return Pending(
        node_id=instance.current_node_id, node_type=node_type, due_at=instance.available_at
    )
