"""``wait``: continue when a matching event is in the inbox, or at the timeout.

Satisfied by the oldest unconsumed matching event, including events delivered before the
node was reached. While waiting, the instance is parked (enqueued, due at the deadline,
holding no worker); a delivery of the event wakes it at once. An event delivered
between the look at the inbox and the park's commit woke nothing: once parked, the node
looks again (``after_commit``) and wakes the instance if one arrived.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from triggers import inbox
from triggers.inbox import inbox_event_json, pending_events
from workflows.definition import Drawing, ExactlyOneOf, FieldSpec, NodeType, node_types
from workflows.durations import parse_duration
from workflows.templating import TemplateError, condition_holds

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    config = step.config
    event_name = config["event"]
    vars_key = NODE.vars_key(step.node_id)
    seen = 0
    for event in pending_events(instance_id=step.instance_id, name=event_name):
        seen = max(seen, event.pk)
        as_json = inbox_event_json(event)
        match = config.get("match")
        try:
            matched = match is None or condition_holds(match, {**step.context, "event": as_json})
        except TemplateError as exc:
            raise ProviderError(f"match: {exc}", permanent=True) from exc
        if matched:
            return NodeResult(
                output={"received": True, "event": as_json},
                vars_key=vars_key,
                consume_inbox_id=event.pk,
            )
    instance = step.instance
    deadline = instance.wait_deadline if instance.waiting_for_event == event_name else None
    if deadline is None:
        deadline = step.now + _timeout(config)
    if step.now >= deadline:
        return NodeResult(output={"received": False, "event": None}, vars_key=vars_key)
    return NodeResult(
        output={"waiting_for": event_name, "deadline": deadline.isoformat()},
        park_until=deadline,
        wait_event=event_name,
        inbox_seen_id=seen,
        after_commit=partial(_wake_if_delivered, step.instance_id, event_name, seen),
    )


def _timeout(config: Mapping[str, Any]) -> timedelta:
    if config.get("timeout_ms") is not None:
        return timedelta(milliseconds=int(config["timeout_ms"]))
    return parse_duration(config["timeout"])


def _wake_if_delivered(instance_id: uuid.UUID, event: str, seen: int) -> None:
    """After the park committed: wake the instance if ``event`` arrived after the look."""
    if inbox.has_events_after(instance_id=instance_id, name=event, after_id=seen):
        inbox.wake_waiting(instance_ids=[instance_id], event=event)


def preview(step: StepContext) -> NodeResult:
    """A preview reads no inbox: no event arrives, the timeout branch is followed."""
    result = NodeResult(
        output={"received": False, "event": None}, vars_key=NODE.vars_key(step.node_id)
    )
    if _timeout(step.config) > timedelta(0):
        result.note = "no event in a preview: the timeout branch is followed"
    return result


def summary(config: Mapping[str, Any]) -> str:
    timeout = config.get("timeout") or f"{config.get('timeout_ms')} ms"
    return f"for {config.get('event', '')} ≤ {timeout}"


NODE = node_types.register(
    NodeType(
        name="wait",
        description="Wait for an event in the instance's inbox (including events that "
        "arrived earlier), at most until the timeout (exactly one of timeout, timeout_ms). "
        "Output in `vars.wait_<node id>`: {received, event}.",
        fields={
            "event": FieldSpec(True, "name", "Name of the event to wait for."),
            "timeout": FieldSpec(
                False, "duration", 'Give up after this long ("24h", "PT30M", ...).'
            ),
            "timeout_ms": FieldSpec(False, "int", "Give up after this many milliseconds."),
            "match": FieldSpec(
                False,
                "condition",
                "Liquid expression an event must satisfy, over the context plus `event` "
                "({name, event_id, context, received_at}), e.g. "
                "`event.context.order_id == payload.order_id`.",
            ),
        },
        run=execute,
        preview=preview,
        exactly_one_of=ExactlyOneOf(
            ("timeout", "timeout_ms"), code="invalid_timeout", at="timeout"
        ),
        drawing=Drawing(colour="#b26a00", summary=summary),
    )
)
