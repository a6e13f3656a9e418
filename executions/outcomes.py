"""What ``step_execute`` returns: one value per way a step can end (for logs, tests and
the task's result)."""

from __future__ import annotations

from enum import StrEnum


class StepOutcome(StrEnum):
    # The node ran and the instance moved on.
    ADVANCED = "advanced"
    COMPLETED = "completed"
    # Parked at its node: a wait with no event yet, a delay at the end of the workflow.
    WAITING = "waiting"
    # The node failed; the error kind says what happens next (executions.retry_policy).
    FAILED_TRANSIENT = "failed:transient"
    FAILED_PERMANENT = "failed:permanent"
    FAILED_DEFERRED = "failed:deferred"
    # Nothing claimed: no such instance, a message too early (sent again), or an
    # instance in a status this message cannot run (a duplicate or stale message).
    MISSING = "missing"
    EARLY = "early"
    # Due, but its workflow's concurrency limit is reached: sent again shortly.
    DEFERRED_CONCURRENCY = "deferred:concurrency"
    SKIPPED_ENQUEUED = "skipped:enqueued"
    SKIPPED_PROCESSING = "skipped:processing"
    SKIPPED_COMPLETED = "skipped:completed"
    SKIPPED_FAILED = "skipped:failed"
    SKIPPED_CANCELLED = "skipped:cancelled"

    @classmethod
    def failed(cls, error_kind: str) -> StepOutcome:
        return cls(f"failed:{error_kind}")

    @classmethod
    def skipped(cls, status: str) -> StepOutcome:
        return cls(f"skipped:{status}")

    @property
    def is_failure(self) -> bool:
        return self.startswith("failed:")
