"""``emit``: raise an event, processed like ``POST /events/`` after the step commits
(SPEC §8). Written to the outbox in the step's outcome transaction, once per
(instance, node), so a retried or redelivered step never emits twice."""

from __future__ import annotations

from typing import Any

from workflows.templating import TemplateError, render

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext


def _render_value(value: Any, step: StepContext, path: str) -> Any:
    if isinstance(value, str):
        try:
            return render(value, step.context)
        except TemplateError as exc:
            raise ProviderError(f"{path}: template error: {exc}", permanent=True) from exc
    if isinstance(value, list):
        return [_render_value(v, step, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _render_value(v, step, f"{path}.{k}") for k, v in value.items()}
    return value


def execute(step: StepContext) -> NodeResult:
    config = step.config
    name = step.render("event").strip()
    if not name:
        raise ProviderError("event: renders to nothing", permanent=True)
    event_id = (
        step.render("event_id").strip()
        if config.get("event_id")
        else f"{step.instance_id}:{step.node_id}"
    )
    subjects = [s.strip() for s in _render_value(config.get("subjects", []), step, "subjects")]
    context = (
        _render_value(config["context"], step, "context")
        if "context" in config
        else step.context["payload"]
    )
    emitted = {"name": name, "event_id": event_id}
    return NodeResult(
        output={**emitted, "subjects": [s for s in subjects if s]},
        vars_key=f"emit_{step.node_id}",
        emit={**emitted, "subjects": [s for s in subjects if s], "context": context},
    )
