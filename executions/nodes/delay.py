"""``delay``: the next node becomes due at the end of the delay.

A delay with a next node advances the cursor at once, due at the delay's end. A delay
at the end of the workflow has nothing to advance to: it parks at its own node until
its end (``wait_deadline``, as a wait does), and when it runs again there - due, or
made due by an operator's run-now - the instance completes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from workflows.definition import Drawing, ExactlyOneOf, FieldSpec, NodeType, node_types
from workflows.durations import MAX_DURATION, parse_duration

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    instance = step.instance
    if instance.wait_deadline is not None and instance.waiting_for_event is None:
        return _resume(step, instance.wait_deadline)
    config = step.config
    if config.get("delay_ms") is not None:
        resume_at = step.now + timedelta(milliseconds=int(config["delay_ms"]))
        how = f"delay_ms={config['delay_ms']}"
    elif config.get("duration") is not None:
        resume_at = step.now + parse_duration(config["duration"])
        how = f"duration={config['duration']}"
    else:
        text = step.render("until").strip()
        resume_at = _until(text, step.now)
        how = f"until={text[:100]}"
    output = {"resume_at": resume_at.isoformat(), "rule": how}
    if resume_at <= step.now:
        output["note"] = "the delay ends in the past: continuing at once"
        resume_at = step.now
    return NodeResult(output=output, resume_at=resume_at)


def _until(text: str, now: datetime) -> datetime:
    """The rendered ``until`` as an aware UTC instant at most MAX_DURATION (the cap a
    ``duration`` has at save) after ``now``; a permanent error otherwise.

    Checked here, where a payload's value becomes an instance's ``available_at``: an
    instant Python can represent may still lie past PostgreSQL's year 9999 once moved to
    UTC (``9999-12-31T23:59:59-05:00``), and such a row cannot be read back. An instant
    in the past (however far) continues at once."""
    shown = repr(text) if len(text) <= 80 else repr(text[:80] + "…")
    try:
        until = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ProviderError(f"until: {shown} is not an ISO-8601 timestamp", permanent=True) from exc
    if until.tzinfo is None:
        until = until.replace(tzinfo=UTC)
    # Aware subtraction works on the offsets without converting (no overflow at the
    # edges of the calendar); timedelta spans far more than any datetime difference.
    ahead = until - now
    if ahead > MAX_DURATION:
        raise ProviderError(
            f"until: {shown} is more than the maximum of {MAX_DURATION.days} days away",
            permanent=True,
        )
    if ahead <= timedelta(0):
        return until  # the caller continues at once (not converted: year 1 may underflow)
    return until.astimezone(UTC)


def _resume(step: StepContext, deadline: datetime) -> NodeResult:
    """Back at a delay that parked at its own node (the end of the workflow)."""
    if step.now < deadline:  # not over yet (an early message): park again, same end
        return NodeResult(
            output={"resume_at": deadline.isoformat()}, resume_at=deadline, park_until=deadline
        )
    return NodeResult(output={"resume_at": deadline.isoformat(), "delay_over": True})


def summary(config: Mapping[str, Any]) -> str:
    for key in ("duration", "delay_ms", "until"):
        if config.get(key) is not None:
            value = config[key]
            return f"{value} ms" if key == "delay_ms" else f"{key} {value}"
    return ""


NODE = node_types.register(
    NodeType(
        name="delay",
        description="Pause the instance (exactly one of delay_ms, duration, until); no worker "
        "is held while it waits.",
        fields={
            "delay_ms": FieldSpec(False, "int", "Wait this many milliseconds."),
            "duration": FieldSpec(
                False,
                "duration",
                'Wait this long: "90s", "15m", "2h", "1d", "1h30m" or "PT15M".',
            ),
            "until": FieldSpec(
                False,
                "template",
                "Wait until this instant: a template rendering to an ISO-8601 timestamp "
                "(a past instant continues at once).",
            ),
        },
        run=execute,
        exactly_one_of=ExactlyOneOf(("delay_ms", "duration", "until"), code="invalid_delay"),
        writes_vars=False,
        drawing=Drawing(summary=summary, mermaid=("{{", "}}"), dot_shape="hexagon"),
    )
)
