"""``shout``: a node type that exists only in the test suite, and all of it is in this
module - the checklist of docs/architecture.md, "How to add a node type". The API
validates and describes it, the preview and a real worker run it and the console draws it
because this module registers it (tests/executions/test_node_registry.py): a worker gets
it from ``NOTIFYFLOW_NODE_MODULES=tests.executions.shout_node``.

It renders ``text``, upper-cased and repeated ``times`` times, into
``vars.shout_<node id>``; once its step is committed it logs that it shouted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from executions.providers.base import ProviderError
from executions.step import NodeResult, StepContext
from workflows.definition import Drawing, FieldSpec, NodeType, node_types

logger = logging.getLogger("notifyflow.shout")
MAX_TIMES = 5


def execute(step: StepContext) -> NodeResult:
    text = step.render("text").strip()
    if not text:
        raise ProviderError("text: renders to nothing", permanent=True)
    shout = " ".join([f"{text.upper()}!"] * int(step.config.get("times", 1)))
    return NodeResult(
        output={"shout": shout},
        vars_key=NODE.vars_key(step.node_id),
        after_commit=partial(logger.info, "shouted at %s: %s", step.idempotency_key, shout),
    )


def summary(config: Mapping[str, Any]) -> str:
    return f"{config.get('text', '')} ×{config.get('times', 1)}"


NODE = node_types.register(
    NodeType(
        name="shout",
        description="Shout `text` (a template), upper-cased, `times` times. Output in "
        "`vars.shout_<node id>`: {shout}.",
        fields={
            "text": FieldSpec(True, "template", "What to shout (template)."),
            "times": FieldSpec(
                False,
                "integer",
                f"How many times (1-{MAX_TIMES}; default 1).",
                minimum=1,
                maximum=MAX_TIMES,
            ),
        },
        run=execute,
        drawing=Drawing(colour="#d81b60", label="SHOUT!", summary=summary),
    )
)
