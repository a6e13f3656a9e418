"""``throttle``: at most ``limit`` instances pass within a sliding ``window``.

The count lives in PostgreSQL (``gates.throttles``: one atomic statement per
pass, whatever the number of workers). Per ``scope``: this node of this workflow
(``"<workflow key>:<node id>"``), or the instance's recipient across every workflow's
throttle nodes with the same rendered ``key``.

- Room: the instance passes, ``vars.throttle_<node>`` = ``{throttled: false, count,
  limit, key}``, and goes on along the edges.
- Full, ``on_limit: skip`` (default): the step is skipped with ``throttled`` and the
  instance ends here, completed (its edges are not followed).
- Full, ``on_limit: defer``: the instance parks (enqueued, holding no worker) until the
  oldest hit leaves the window, then tries again (another instance may have taken the
  room meanwhile: it parks again).
- Released by an operator (run-now: ``parked_on == "override"``): it passes whatever
  the count, and its hit is recorded (it did go through: the window's later passes see
  it), so a release never opens the gate for others.
- A payload-only instance under ``scope: recipient`` has no one to count: it passes,
  uncounted, with a note in its output.
"""

from __future__ import annotations

from typing import Any

from gates.models import ThrottleScope
from gates.throttles import MAX_KEY_LENGTH, throttle_pass, workflow_subject
from triggers.models import ParkedOn
from workflows.definition import FieldSpec, NodeType, node_types
from workflows.durations import parse_duration

from ..models import SkipReason
from ..providers.base import ProviderError
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    config = step.config
    limit = int(config["limit"])
    scope = config.get("scope") or ThrottleScope.WORKFLOW
    key = step.render("key").strip() if config.get("key") else ""
    if len(key) > MAX_KEY_LENGTH:
        raise ProviderError(
            f"key: renders to {len(key)} characters, over the limit of {MAX_KEY_LENGTH}",
            permanent=True,
        )
    vars_key = NODE.vars_key(step.node_id)
    output: dict[str, Any] = {"throttled": False, "count": 0, "limit": limit, "key": key}
    if step.preview:
        return NodeResult(output={**output, "note": "a preview counts nothing"}, vars_key=vars_key)
    if scope == ThrottleScope.RECIPIENT:
        recipient = step.audience.recipient
        if recipient is None:
            output["note"] = "no recipient to count (a payload-only instance): passed uncounted"
            return NodeResult(output=output, vars_key=vars_key)
        subject = recipient.id
    else:
        subject = workflow_subject(workflow=step.workflow_key, node=step.node_id)
    released = step.instance.parked_on == ParkedOn.OVERRIDE
    decision = throttle_pass(
        scope=scope,
        subject=subject,
        key=key,
        limit=limit,
        window=parse_duration(config["window"]),
        now=step.now,
        force=released,
    )
    output["count"] = decision.count
    if decision.passed:
        if released:
            output["note"] = "released by an operator (run now): passed whatever the count"
        return NodeResult(output=output, vars_key=vars_key)
    output["throttled"] = True
    assert decision.retry_at is not None
    if config.get("on_limit") == "defer":
        output["deferred_until"] = decision.retry_at.isoformat()
        return NodeResult(
            output=output,
            vars_key=vars_key,
            park_until=max(decision.retry_at, step.now),
            park_on=ParkedOn.THROTTLE,
        )
    output.update(skipped=True, reason=SkipReason.THROTTLED, room_at=decision.retry_at.isoformat())
    return NodeResult(output=output, vars_key=vars_key, end=True, skip_reason=SkipReason.THROTTLED)


MAX_LIMIT = 10_000

NODE = node_types.register(
    NodeType(
        name="throttle",
        description="Let at most `limit` instances through within a sliding `window`; the "
        "others end (skipped, `throttled`) or wait for room (`on_limit: defer`). Output in "
        "`vars.throttle_<node id>`: {throttled, count, limit, key}.",
        fields={
            "limit": FieldSpec(
                True,
                "integer",
                f"At most this many instances pass within the window (1-{MAX_LIMIT:,}).",
                minimum=1,
                maximum=MAX_LIMIT,
            ),
            "window": FieldSpec(
                True,
                "window",
                'The sliding window: "1h", "1d", "PT30M", ... (as for delay; more than 0).',
            ),
            "key": FieldSpec(
                False,
                "template",
                "What is counted apart (template, at most 255 characters rendered), e.g. "
                "`{{ payload.account_id }}`. Default: one counter.",
            ),
            "scope": FieldSpec(
                False,
                "choice",
                '"workflow" (default): this node of this workflow counts its instances; '
                "\"recipient\": the instance's recipient is counted across every workflow's "
                "throttle nodes with the same key.",
                choices=("workflow", "recipient"),
            ),
            "on_limit": FieldSpec(
                False,
                "choice",
                '"skip" (default): the instance ends here, completed, its step skipped with '
                '`throttled`; "defer": it waits (holding no worker) until the window has room.',
                choices=("skip", "defer"),
            ),
        },
        run=execute,
    )
)
