"""What a channel node checks about its recipient when it runs: the one
preference rule (``recipients.preferences.evaluate``, once per send), the address the
recipient has for the channel, the ``to`` default, and the one-click unsubscribe
headers of an email. A node that decides not to send returns a skip: it succeeds, with
``skip_reason`` and ``{skipped, reason, rule?}`` as its output and ``vars`` entry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gates import send_windows
from recipients.preferences import evaluate, unsubscribe_scope
from recipients.unsubscribe import unsubscribe_url
from triggers.models import ParkedOn
from workflows.durations import parse_duration

from .models import DeliveryStatus, SkipReason
from .providers.base import ProviderError
from .selectors import node_reached_at
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
    if step.preview or step.delivery.status == DeliveryStatus.SENT:
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


def preference(step: StepContext, channel: str) -> tuple[NodeResult | None, str | None]:
    """``(skip, rule)`` of the one preference rule for a send on ``channel`` to the
    instance's recipient: a ``preference_opt_out`` skip when they opted out, else None;
    and the rule that decided. ``(None, None)`` without a recipient, in a preview, and
    when the send was recorded already (a channel with no address field: push, chat)."""
    person = step.audience.recipient
    if person is None or step.preview or step.delivery.status == DeliveryStatus.SENT:
        return None, None
    decision = evaluate(
        preferences=person.preferences,
        workflow_key=step.workflow_key,
        categories=step.audience.categories,
        channel=channel,
        critical=step.audience.critical,
    )
    if not decision.send:
        return skipped(step, channel, SkipReason.PREFERENCE_OPT_OUT, decision.rule), decision.rule
    return None, decision.rule


def send_window_gate(
    step: StepContext, channel: str, *, timezone: str | None = None, to_recipient: bool = True
) -> NodeResult | None:
    """Send-window gate: outside the node's ``send_window`` or inside the recipient's quiet hours
    (ignored by a critical workflow), park until the send is allowed - or, when that
    would come past ``expires_after`` counted from when the node was reached, skip with
    ``expired``. None: send now (also when an operator's run-now released it, and in a
    preview). ``timezone``: the one quiet hours and a ``"recipient"`` window use instead
    of the recipient's (a push device's); ``to_recipient=False``: the send does not go
    to the recipient (a chat node's fixed channel), so their quiet hours and time zone
    do not apply."""
    if step.preview or step.delivery.status == DeliveryStatus.SENT:
        return None
    if step.instance.parked_on == ParkedOn.OVERRIDE:
        return None
    person = step.audience.recipient if to_recipient else None
    rules: dict[str, Any] = dict(
        send_window=step.config.get("send_window"),
        quiet_hours=(person.preferences.get("quiet_hours") if person is not None else None),
        recipient_timezone=timezone or (person.timezone if person is not None else None),
        ignore_quiet_hours=step.audience.critical,
    )
    if rules["send_window"] is None and rules["quiet_hours"] is None:
        return None
    send_at = send_windows.next_send_time(now=step.now, **rules)
    deferred = step.instance.parked_on == ParkedOn.SEND_WINDOW
    if send_at <= step.now and not deferred:
        return None
    expires = step.config.get("expires_after")
    if expires:
        reached = node_reached_at(instance_id=step.instance_id, node_id=step.node_id) or step.now
        if send_windows.expired(
            reached_at=reached, expires_after=parse_duration(expires), send_at=send_at
        ):
            skip = skipped(step, channel, SkipReason.EXPIRED)
            skip.output.update(
                reached_at=reached.isoformat(),
                expires_after=expires,
                send_window_opens_at=send_at.isoformat(),
            )
            return skip
    if send_at <= step.now:
        return None  # the window opened: send
    return NodeResult(
        output={
            "deferred_until": send_at.isoformat(),
            "reason": send_windows.deferral_reason(now=step.now, **rules),
        },
        park_until=send_at,
        park_on=ParkedOn.SEND_WINDOW,
    )


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


def to_summary(config: Mapping[str, Any], channel: str) -> str:
    """Whom a sending node's config sends to, for its drawing: its ``to``, else the
    recipient's address for the channel (``addresses``)."""
    to = config.get("to")
    if not to:
        return f"to recipient.{ADDRESS_FIELD[channel]}"
    return f"to {', '.join(map(str, to)) if isinstance(to, list) else to}"


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
    url = step.context.get("unsubscribe_url") or None
    if url is None:
        raise ProviderError(
            f"node {step.node_id}: NOTIFYFLOW_PUBLIC_URL is not set, and an email of a"
            " non-critical workflow to a recipient needs it for its List-Unsubscribe link",
            permanent=True,
        )
    return {
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": ONE_CLICK_POST,
    }
