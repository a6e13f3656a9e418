"""A workflow's concurrency key: a Liquid template rendered once per instance
when it is created, which decides whose steps share the workflow's limit.

What the key sees is smaller than a node's context: only what every creation path knows
without reading anything (``KEY_VARIABLES``). A list fan-out's batch knows its members'
ids, not their rows, and a person's fields may change after the key is fixed. A key
reading anything else is refused when the workflow is saved.

The meaning of a rendered key: instances with the same (workflow, key) share the limit;
the empty key (no template, or one that renders nothing) is one limit for the whole
workflow. A key that fails to render (a payload without the field) takes the empty key
too: the instance is still limited, more tightly, never unlimited - and its creation is
not refused over its throttle. Keys longer than ``MAX_KEY_LENGTH`` are cut there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .templating import TemplateError, check_template, render, variable_paths

logger = logging.getLogger("notifyflow.workflows")

# The largest limit (Workflow.concurrency_limit is a PostgreSQL integer; far beyond any
# number of workers anyway).
MAX_LIMIT = 1_000_000
# The column's width (TriggerInstance.concurrency_key).
MAX_KEY_LENGTH = 255
# The template's own limit (Workflow.concurrency_key).
MAX_TEMPLATE_LENGTH = 500


@dataclass(frozen=True)
class Concurrency:
    """A workflow's ``concurrency`` setting: at most ``limit`` executing steps per
    rendered ``key``; ``limit`` None is no limit (then ``key`` must be "")."""

    limit: int | None
    key: str = ""


NO_LIMIT = Concurrency(limit=None)

# What a key template may read: a root of its own, or exactly one field of a root.
KEY_VARIABLES = {
    "payload": None,  # any path under it
    "recipient": ("id",),
    "trigger": ("idempotency_key",),
    "workflow": ("key",),
}


def key_template_problem(source: str) -> str | None:
    """Why ``source`` cannot be a concurrency key template (None: it can): too long, not
    a template that parses, or reading a variable outside ``KEY_VARIABLES``."""
    if len(source) > MAX_TEMPLATE_LENGTH:
        return f"at most {MAX_TEMPLATE_LENGTH} characters"
    try:
        check_template(source)
    except TemplateError as exc:
        return f"invalid Liquid template: {exc}"
    for path in variable_paths(source):
        if not path:
            continue  # a computed root (``[x]``): nothing known to check
        root, fields = path[0], KEY_VARIABLES.get(path[0], ())
        if root not in KEY_VARIABLES or (fields is not None and path[1:2] != fields[:1]):
            allowed = "payload.*, recipient.id, trigger.idempotency_key, workflow.key"
            return f"{'.'.join(path)} is not known when an instance is created; use {allowed}"
    return None


def key_render(
    *,
    template: str,
    payload: dict[str, Any],
    idempotency_key: str,
    workflow_key: str,
    recipient_id: str | None,
) -> str:
    """The instance's concurrency key: ``template`` rendered over ``KEY_VARIABLES``,
    stripped and cut to ``MAX_KEY_LENGTH``; "" if there is no template or it fails to
    render (logged)."""
    if not template:
        return ""
    context = {
        "payload": payload,
        "recipient": {"id": recipient_id},
        "trigger": {"idempotency_key": idempotency_key},
        "workflow": {"key": workflow_key},
    }
    try:
        return render(template, context).strip()[:MAX_KEY_LENGTH]
    except TemplateError as exc:
        logger.warning(
            "workflow %s: concurrency key does not render (%s); the instance takes the "
            "workflow-wide key",
            workflow_key,
            exc,
        )
        return ""
