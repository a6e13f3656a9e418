"""``wait``: continue when a matching event is in the inbox, or at the timeout (SPEC §8).

Satisfied by the oldest unconsumed matching event, including events delivered before the
node was reached. While waiting, the instance is parked (enqueued, due at the deadline,
holding no worker); a delivery of the event wakes it at once.
"""

from __future__ import annotations

from datetime import timedelta

from triggers.inbox import inbox_event_json, pending_events
from workflows.durations import parse_duration
from workflows.templating import TemplateError, condition_holds

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    config = step.config
    event_name = config["event"]
    vars_key = f"wait_{step.node_id}"
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
    deadline = step.wait_deadline if step.waiting_for_event == event_name else None
    if deadline is None:
        if config.get("timeout_ms") is not None:
            timeout = timedelta(milliseconds=int(config["timeout_ms"]))
        else:
            timeout = parse_duration(config["timeout"])
        deadline = step.now + timeout
    if step.now >= deadline:
        return NodeResult(output={"received": False, "event": None}, vars_key=vars_key)
    return NodeResult(
        output={"waiting_for": event_name, "deadline": deadline.isoformat()},
        park_until=deadline,
        wait_event=event_name,
        inbox_seen_id=seen,
    )
