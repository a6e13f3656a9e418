"""``delay``: the next node becomes due at the end of the delay.

A delay with a next node advances the cursor at once, due at the delay's end. A delay
at the end of the workflow has nothing to advance to: it parks at its own node until
its end (``wait_deadline``, as a wait does), and when it runs again there - due, or
made due by an operator's run-now - the instance completes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.durations import parse_duration

from ..providers.base import ProviderError
from .base import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    if step.wait_deadline is not None and step.waiting_for_event is None:
        return _resume(step, step.wait_deadline)
    config = step.config
    if config.get("delay_ms") is not None:
        resume_at = step.now + timedelta(milliseconds=int(config["delay_ms"]))
        how = f"delay_ms={config['delay_ms']}"
    elif config.get("duration") is not None:
        resume_at = step.now + parse_duration(config["duration"])
        how = f"duration={config['duration']}"
    else:
        text = step.render("until").strip()
        try:
            resume_at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ProviderError(
                f"until: {text!r} is not an ISO-8601 timestamp", permanent=True
            ) from exc
        if resume_at.tzinfo is None:
            resume_at = resume_at.replace(tzinfo=UTC)
        how = f"until={text}"
    output = {"resume_at": resume_at.isoformat(), "rule": how}
    if resume_at <= step.now:
        output["note"] = "the delay ends in the past: continuing at once"
        resume_at = step.now
    return NodeResult(output=output, resume_at=resume_at)


def _resume(step: StepContext, deadline: datetime) -> NodeResult:
    """Back at a delay that parked at its own node (the end of the workflow)."""
    if step.now < deadline:  # not over yet (an early message): park again, same end
        return NodeResult(
            output={"resume_at": deadline.isoformat()}, resume_at=deadline, park_until=deadline
        )
    return NodeResult(output={"resume_at": deadline.isoformat(), "delay_over": True})
