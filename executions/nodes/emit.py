"""``emit``: raise an event, processed like ``POST /events/`` after the step commits
(docs/workflows.md#emit). Written to the outbox in the step's outcome transaction, once per
(instance, node), so a retried or redelivered step never emits twice."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

from triggers import outbox
from workflows.definition import Drawing, FieldSpec, NodeType, node_types
from workflows.templating import TemplateError, render

from ..providers.base import ProviderError
from ..step import NodeResult, StepContext

logger = logging.getLogger("notifyflow.engine")


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
        vars_key=NODE.vars_key(step.node_id),
        emit={**emitted, "subjects": [s for s in subjects if s], "context": context},
        after_commit=partial(_process, step.instance_id, step.node_id),
    )


def _process(instance_id: uuid.UUID, node_id: str) -> None:
    """Once recorded, the event is processed at once (the sweeper catches one whose
    processing is lost)."""
    try:
        outbox.outbox_process(instance_id=instance_id, node_id=node_id)
    except Exception:  # the sweeper retries it; the step itself is done
        logger.exception("outbox %s:%s processing failed", instance_id, node_id)


def summary(config: Mapping[str, Any]) -> str:
    return f"event {config.get('event', '')}"


NODE = node_types.register(
    NodeType(
        name="emit",
        description="Raise an event, processed like POST /api/v1/events/ once the step is "
        "recorded (never twice). Output in `vars.emit_<node id>`: {name, event_id, subjects}.",
        fields={
            "event": FieldSpec(True, "template", "Name of the event to raise (template)."),
            "subjects": FieldSpec(
                False,
                "template_list",
                "Subjects (templates): running instances with an equal interest receive it.",
            ),
            "context": FieldSpec(
                False,
                "template_object",
                "The event's context; string values are templates. Default: the payload.",
            ),
            "event_id": FieldSpec(
                False, "template", "Event id (template). Default: `<instance id>:<node id>`."
            ),
        },
        run=execute,
        drawing=Drawing(colour="#1d7f4e", summary=summary),
    )
)
