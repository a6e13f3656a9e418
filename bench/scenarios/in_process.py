"""What the in-process step benches share (push, preferences, translations): due
instances inserted in bulk, one per person, and each step timed through
``engine.step_execute`` in this process (no broker, no worker)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from executions import engine
from notifyflow.ids import uuid7
from recipients.models import Recipient
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow


def due_instances(
    workflow: Workflow,
    people: Sequence[Recipient],
    *,
    key_prefix: str,
    node_id: str,
    payload: dict[str, Any],
) -> list[uuid.UUID]:
    """An enqueued instance per person, due now at ``node_id`` of the workflow's current
    version, inserted in bulk; their ids in the people's order."""
    past = timezone.now() - timedelta(seconds=1)
    rows = [
        TriggerInstance(
            id=uuid7(),
            workflow=workflow,
            workflow_version=workflow.current_version,
            idempotency_key=f"{key_prefix}-{i}",
            payload=payload,
            status=TriggerStatus.ENQUEUED,
            current_node_id=node_id,
            vars={},
            attempts=0,
            available_at=past,
            dispatched_at=past,
            recipient=person,
        )
        for i, person in enumerate(people)
    ]
    TriggerInstance.objects.bulk_create(rows, batch_size=1000)
    return [row.id for row in rows]


def timed_steps(ids: Sequence[uuid.UUID]) -> tuple[list[float], list[float]]:
    """Run each instance's step; each step's (wall, CPU) seconds."""
    wall, cpu = [], []
    for instance_id in ids:
        w0, c0 = time.perf_counter(), time.process_time()
        engine.step_execute(instance_id=instance_id, worker="bench")
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return wall, cpu
