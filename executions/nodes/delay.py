from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.durations import parse_duration

from ..providers.base import ProviderError
from .base import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
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
