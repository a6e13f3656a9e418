"""``sms``: send an SMS through the configured backend(s), to the node's ``to`` or the
recipient's phone, under the recipient's preferences (channel ``sms``), the node's send
window and the recipient's quiet hours."""

from __future__ import annotations

from functools import partial

from workflows.definition import (
    EXPIRES_AFTER_FIELD,
    RETRY_FIELD,
    SEND_WINDOW_FIELD,
    Drawing,
    FieldSpec,
    NodeType,
    node_types,
)

from .. import audience
from ..deliveries import guarded_send
from ..providers.base import ProviderError
from ..providers.sms import SmsMessage, send_sms
from ..step import NodeResult, StepContext

CHANNEL = "sms"


def execute(step: StepContext) -> NodeResult:
    skip, rule = audience.check(step, CHANNEL)
    if skip is not None:
        return skip
    deferred = audience.send_window_gate(step, CHANNEL)
    if deferred is not None:
        return deferred
    to = next(iter(audience.addresses(step, CHANNEL)), "")
    body = step.render("body")
    if not body.strip():
        raise ProviderError("body: rendered to an empty message", permanent=True)

    def send() -> dict:
        result = send_sms(
            SmsMessage(to=to, body=body, from_number="", idempotency_key=step.idempotency_key)
        )
        return {"message_id": result.message_id, "to": to, "sent_at": step.now.isoformat()}

    output = guarded_send(step=step, channel=CHANNEL, recipient=to, send=send)
    return NodeResult(output=audience.with_rule(output, rule), vars_key=NODE.vars_key(step.node_id))


NODE = node_types.register(
    NodeType(
        name="sms",
        description="Send an SMS through the configured SMS backend(s). Output in "
        "`vars.sms_<node id>`: {message_id, to, sent_at}.",
        fields={
            "to": FieldSpec(
                False,
                "template",
                "Recipient: a template rendering to one E.164 phone number. Optional: without "
                "it, the instance's recipient's phone (`{{ recipient.phone }}`); an instance "
                "with neither fails.",
            ),
            "body": FieldSpec(True, "template", "Message text (template); must not render empty."),
            "retry": RETRY_FIELD,
            "send_window": SEND_WINDOW_FIELD,
            "expires_after": EXPIRES_AFTER_FIELD,
        },
        run=execute,
        channel=CHANNEL,
        drawing=Drawing(
            colour="#7b3fb3",
            summary=partial(audience.to_summary, channel=CHANNEL),
            mermaid=("(", ")"),
            dot_style="rounded",
        ),
    )
)
