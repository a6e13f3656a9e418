from __future__ import annotations

from ..deliveries import guarded_send
from ..providers.base import ProviderError
from ..providers.email import send_email
from .base import NodeResult, StepContext, split_addresses


def execute(step: StepContext) -> NodeResult:
    to = split_addresses(step.render("to"))
    if not to:
        raise ProviderError("to: rendered to an empty recipient list", permanent=True)
    subject = step.render("subject").replace("\n", " ").strip()
    body = step.render("body")
    html_body = step.render_optional("html_body", html=True)
    from_email = step.render_optional("from_email")
    reply_to = step.render_optional("reply_to")

    def send() -> dict:
        result = send_email(
            to=to,
            subject=subject,
            body=body,
            html_body=html_body,
            from_email=from_email,
            reply_to=split_addresses(reply_to) if reply_to else None,
            message_id=f"<{step.instance_id}.{step.node_id}@notifyflow>",
            idempotency_key=step.idempotency_key,
        )
        return {
            "message_id": result.message_id,
            "to": to,
            "subject": subject,
            "sent_at": step.now.isoformat(),
        }

    output = guarded_send(step=step, channel="email", recipient=to[0], send=send)
    return NodeResult(output=output, vars_key=f"email_{step.node_id}")
