"""``in_app``: write an item into the recipient's feed. It needs a recipient
(else skipped, ``missing_channel_data``); the recipient's preferences apply with the
channel ``in_app`` (``preference_opt_out``), quiet hours and send windows do not (an
item in a feed disturbs nobody). The write is idempotent per (instance, node): a step
run again after a crash finds its item and writes nothing twice (``feed.services``)."""

from __future__ import annotations

from typing import Any

from feed.services import feed_item_write
from recipients.preferences import evaluate
from workflows.definition import FieldSpec, NodeType, node_types
from workflows.definition.links import link_problem

from .. import audience
from ..models import SkipReason
from ..providers.base import ProviderError
from ..step import NodeResult, StepContext
from .emit import _render_value

CHANNEL = "in_app"


def execute(step: StepContext) -> NodeResult:
    item = _rendered(step)
    if step.preview:  # writes nothing: the item it would write
        return NodeResult(output={"feed_item_id": None, **item}, vars_key=_vars_key(step))
    person = step.audience.recipient
    if person is None:
        return audience.skipped(step, CHANNEL, SkipReason.MISSING_CHANNEL_DATA)
    decision = evaluate(
        preferences=person.preferences,
        workflow_key=step.workflow_key,
        categories=step.audience.categories,
        channel=CHANNEL,
        critical=step.audience.critical,
    )
    if not decision.send:
        return audience.skipped(step, CHANNEL, SkipReason.PREFERENCE_OPT_OUT, decision.rule)
    written = feed_item_write(
        recipient_id=person.id,
        workflow_id=step.instance.workflow_id,
        instance_id=step.instance_id,
        node_id=step.node_id,
        now=step.now,
        **item,
    )
    output = {"feed_item_id": str(written.item_id), "title": item["title"]}
    output["category"] = item["category"]
    return NodeResult(output=audience.with_rule(output, decision.rule), vars_key=_vars_key(step))


def _vars_key(step: StepContext) -> str:
    return NODE.vars_key(step.node_id)


def _rendered(step: StepContext) -> dict[str, Any]:
    """The item's fields: title, body and url rendered (title must not render empty, url
    is a link a person may follow: http(s) or a relative path), the category (the
    node's, else the workflow's first), data's strings rendered."""
    title = step.render("title").strip()
    if not title:
        raise ProviderError("title: renders to nothing", permanent=True)
    url = (step.render_optional("url") or "").strip()
    problem = link_problem(url)
    if problem is not None:
        # Never shown to the person; retrying renders the same (the engine names the node).
        raise ProviderError(f"url: {problem}", permanent=True)
    categories = step.audience.categories
    data = _render_value(step.config.get("data", {}), step, "data")
    return {
        "title": title,
        "body": step.render("body"),
        "url": url,
        "category": step.config.get("category") or (categories[0] if categories else ""),
        "data": data,
    }


NODE = node_types.register(
    NodeType(
        name="in_app",
        description="Write an item into the recipient's in-app feed (once per instance and "
        "node); the recipient's preferences apply (channel `in_app`), quiet hours and send "
        "windows do not. Without a recipient it is skipped (`missing_channel_data`). Output "
        "in `vars.in_app_<node id>`: {feed_item_id, title, category}.",
        fields={
            "title": FieldSpec(
                True, "template", "The item's title (template); must not render empty."
            ),
            "body": FieldSpec(True, "template", "The item's text (template)."),
            "url": FieldSpec(
                False,
                "link",
                "Where the item leads when clicked (template): an http(s) URL or a relative "
                "path (`javascript:`, `data:` and any other scheme are refused).",
            ),
            "category": FieldSpec(
                False, "name", "The item's category; default: the workflow's first category."
            ),
            "data": FieldSpec(
                False,
                "template_object",
                "Anything else the front end shows (a JSON object; string values are templates).",
            ),
        },
        run=execute,
        channel=CHANNEL,
    )
)
