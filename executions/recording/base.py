"""What a step hands to its recorder (``StepRecorder``), and the rules every recorder applies
the same way."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from triggers.models import TriggerInstance

from ..nodes import NodeResult, StepContext
from ..step import NO_AUDIENCE, Audience
from ..versions import PinnedVersion

# The recipient columns a claim reads with its instance (both recorders).
RECIPIENT_FIELDS = ("id", "email", "phone", "timezone", "locale", "properties", "preferences")


@dataclass
class Claimed:
    """A claimed instance with what its step needs: the pinned version, what the claim
    saw of this node's delivery record, and the recipient and workflow settings as they
    read now."""

    instance: TriggerInstance
    version: PinnedVersion
    delivery_status: str | None
    delivery_output: dict[str, Any] | None
    audience: Audience = NO_AUDIENCE


@dataclass
class Outcome:
    """How the node's run ended, classified."""

    success: bool
    output: dict[str, Any]
    error: str = ""
    error_kind: str = ""
    permanent: bool = False
    # The node's ``retry`` config (None: the settings' defaults, executions/retry_policy.py).
    retry_policy: dict[str, Any] | None = None
    # Nothing was tried (no send slot free): run again after this long, no attempt counted.
    defer_s: float | None = None
    # The provider asked for at least this long before a retry (``Retry-After``).
    retry_after_s: float | None = None
    # What a failure leads to, for the log line: a retry and when, or the instance failed.
    then: str = ""


@dataclass
class StepRecord:
    """Everything one step writes when it ends: the delivery's outcome (``step``), the
    step log (``log``: StepExecutionLog's values), the fenced transition the outcome
    leads to, and a wait's consumed event or an emit's outbox row (``result``)."""

    instance: TriggerInstance
    lease: uuid.UUID
    started: datetime
    finished: datetime
    outcome: Outcome
    # None when the node is not in the pinned version (nothing ran).
    step: StepContext | None
    result: NodeResult | None
    next_node: str | None
    log: dict[str, Any]
    # The workflow's key (status events name it).
    workflow_key: str = ""

    def not_applied(self, *, cancelled: bool) -> dict[str, str]:
        """The step log's error when the fenced transition did not apply: the instance
        was cancelled while the step ran (its delivery is still recorded), or else the
        lease was lost (recovered by the sweeper; the result is discarded)."""
        prefix = self.outcome.error + "; " if self.outcome.error else ""
        if cancelled:
            return {
                "error": prefix
                + "instance cancelled while this step ran; delivery recorded, not advanced",
                "error_kind": "cancelled",
            }
        return {
            "error": prefix + "lease lost before the outcome was recorded; result discarded",
            "error_kind": "lease_lost",
        }


class StepRecorder(Protocol):
    """Claims an instance for its step and records the step's end: one class per
    database (``postgres.PostgresStepRecorder``, ``orm.OrmStepRecorder``);
    ``executions.recording.RECORDER`` is the one in use."""

    def claim(self, *, instance_id: uuid.UUID | str, worker: str, now: datetime) -> Claimed | None:
        """Claim an enqueued, due instance (``triggers.state.claim``); None if not
        claimable."""
        ...

    def record(self, rec: StepRecord) -> bool:
        """Write the step's end; True if its fenced transition applied."""
        ...
