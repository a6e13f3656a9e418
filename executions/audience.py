"""What a channel node checks about its recipient when it runs (SPEC §12, §4): the one
preference rule (``recipients.preferences.evaluate``, once per send), the address the
recipient has for the channel, the ``to`` default, and the one-click unsubscribe
headers of an email. A node that decides not to send returns a skip: it succeeds, with
``skip_reason`` and ``{skipped, reason, rule?}`` as its output and ``vars`` entry."""

from __future__ import annotations

from typing import Any

from recipients.preferences import evaluate, unsubscribe_scope
from recipients.unsubscribe import unsubscribe_url

from .models import DeliveryStatus, SkipReason
from .providers.base import ProviderError
from .step import Audience, NodeResult, StepContext, recipient

# The recipient's field holding a channel's address.
ADDRESS_FIELD = {"email": "email", "sms": "phone"}
# RFC 8058: the body a one-click POST carries.
ONE_CLICK_POST = "List-Unsubscribe=One-Click"


def skipped(step: StepContext, channel: str, reason: str, rule: str | None = None) -> NodeResult:
    output: dict[str, Any] = {"skipped": True, "reason": reason}
    if rule is not None:
        output["rule"] = rule
    return NodeResult(output=output, vars_key=f"{channel}_{step.node_id}", skip_reason=reason)


def check(step: StepContext, channel: str) -> tuple[NodeResult | None, str | None]:
    """``(skip, rule)``: a skip when this send must not happen (the recipient opted out,
    or has no address for the channel and the node no ``to``), else None; and the
    preference rule that decided (None without a recipient), which a send records in
    its output too. A permanent ProviderError when there is nobody to send to: no ``to``
    and no recipient."""
    if step.preview or step.delivery_status == DeliveryStatus.SENT:
        return None, None  # nothing is sent either way (the guard answers a sent one)
    audience = step.audience
    person = audience.recipient
    if person is None:
        if not step.config.get("to"):
            erased = " (erased)" if audience.recipient_erased else ""
            raise ProviderError(
                f"node {step.node_id} has no `to` and instance has no recipient{erased}",
                permanent=True,
            )
        return None, None
    decision = evaluate(
        preferences=person.preferences,
        workflow_key=step.workflow_key,
        categories=audience.categories,
        channel=channel,
        critical=audience.critical,
    )
    if not decision.send:
        return skipped(step, channel, SkipReason.PREFERENCE_OPT_OUT, decision.rule), decision.rule
    if not step.config.get("to") and not getattr(person, ADDRESS_FIELD[channel]):
        return skipped(step, channel, SkipReason.MISSING_CHANNEL_DATA), decision.rule
    return None, decision.rule


def with_rule(output: dict[str, Any], rule: str | None) -> dict[str, Any]:
    """A send's output with the preference rule that let it go (a recipient's send)."""
    return output if rule is None else {**output, "rule": rule}


def addresses(step: StepContext, channel: str) -> list[str]:
    """The node's ``to``, rendered; without one, the recipient's address for the channel
    (validated like a rendered one). Empty only in a preview with neither."""
    if step.config.get("to"):
        return step.render_recipients("to", kind=channel)
    person = step.audience.recipient
    value = getattr(person, ADDRESS_FIELD[channel]) if person is not None else None
    if not value:
        return []
    return [recipient(f"recipient.{ADDRESS_FIELD[channel]}", value, kind=channel)]


def link(audience: Audience, *, workflow_key: str) -> str | None:
    """The one-click unsubscribe URL of a step: for an instance with a recipient in a
    non-critical workflow, scoped to the workflow's first category, else the workflow.
    None when none applies or NOTIFYFLOW_PUBLIC_URL is unset."""
    if audience.recipient is None or audience.critical:
        return None
    scope = unsubscribe_scope(workflow_key=workflow_key, categories=audience.categories)
    return unsubscribe_url(recipient_id=audience.recipient.id, scope=scope)


def unsubscribe_headers(step: StepContext) -> dict[str, str]:
    """RFC 8058's headers for an email of a non-critical workflow to a recipient; none
    otherwise. A permanent ProviderError when they are due and NOTIFYFLOW_PUBLIC_URL is
    unset (the system check notifyflow.E010 reports that at start-up)."""
    audience = step.audience
    if step.preview or audience.recipient is None or audience.critical:
        return {}
    if step.unsubscribe_url is None:
        raise ProviderError(
            f"node {step.node_id}: NOTIFYFLOW_PUBLIC_URL is not set, and an email of a"
            " non-critical workflow to a recipient needs it for its List-Unsubscribe link",
            permanent=True,
        )
    return {
        "List-Unsubscribe": f"<{step.unsubscribe_url}>",
        "List-Unsubscribe-Post": ONE_CLICK_POST,
    }
