from __future__ import annotations

from .. import audience
from ..deliveries import guarded_send
from ..providers.email import send_email
from ..step import NodeResult, StepContext


def execute(step: StepContext) -> NodeResult:
    skip, rule = audience.check(step, "email")
    if skip is not None:
        return skip
    deferred = audience.send_window_gate(step, "email")
    if deferred is not None:
        return deferred
    to = audience.addresses(step, "email")
    headers = audience.unsubscribe_headers(step)
    subject = step.render_header("subject")
    body = step.render("body")
    html_body = step.render_optional("html_body", html=True)
    from_email = step.render_header("from_email") if step.config.get("from_email") else None
    reply_to = (
        step.render_recipients("reply_to", kind="email") if step.config.get("reply_to") else None
    )

    def send() -> dict:
        result = send_email(
            to=to,
            subject=subject,
            body=body,
            html_body=html_body,
            from_email=from_email,
            reply_to=reply_to,
            message_id=f"<{step.instance_id}.{step.node_id}@notifyflow>",
            idempotency_key=step.idempotency_key,
            headers=headers,
        )
        return {
            "message_id": result.message_id,
            "to": to,
            "subject": subject,
            "sent_at": step.now.isoformat(),
        }

    output = guarded_send(step=step, channel="email", recipient=to[0] if to else "", send=send)
    return NodeResult(output=audience.with_rule(output, rule), vars_key=f"email_{step.node_id}")
