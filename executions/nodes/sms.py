from __future__ import annotations

from .. import audience
from ..deliveries import guarded_send
from ..providers.base import ProviderError
from ..providers.sms import SmsMessage, send_sms
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    skip, rule = audience.check(step, "sms")
    if skip is not None:
        return skip
    deferred = audience.send_window_gate(step, "sms")
    if deferred is not None:
        return deferred
    to = next(iter(audience.addresses(step, "sms")), "")
    body = step.render("body")
    if not body.strip():
        raise ProviderError("body: rendered to an empty message", permanent=True)

    def send() -> dict:
        result = send_sms(
            SmsMessage(to=to, body=body, from_number="", idempotency_key=step.idempotency_key)
        )
        return {"message_id": result.message_id, "to": to, "sent_at": step.now.isoformat()}

    output = guarded_send(step=step, channel="sms", recipient=to, send=send)
    return NodeResult(output=audience.with_rule(output, rule), vars_key=f"sms_{step.node_id}")
