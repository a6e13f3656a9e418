"""``email``: send an email through the configured backend(s), to the node's ``to`` or
the recipient's address, under the recipient's preferences (channel ``email``), the
node's send window and the recipient's quiet hours."""

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
from ..providers.email import send_email
from ..step import NodeResult, StepContext

CHANNEL = "email"


def execute(step: StepContext) -> NodeResult:
    skip, rule = audience.check(step, CHANNEL)
    if skip is not None:
        return skip
    deferred = audience.send_window_gate(step, CHANNEL)
    if deferred is not None:
        return deferred
    to = audience.addresses(step, CHANNEL)
    headers = audience.unsubscribe_headers(step)
    subject = step.render_header("subject")
    body = step.render("body")
    html_body = step.render_optional("html_body", html=True)
    from_email = step.render_header("from_email") if step.config.get("from_email") else None
    reply_to = (
        step.render_recipients("reply_to", kind=CHANNEL) if step.config.get("reply_to") else None
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

    output = guarded_send(step=step, channel=CHANNEL, recipient=to[0] if to else "", send=send)
    return NodeResult(output=audience.with_rule(output, rule), vars_key=NODE.vars_key(step.node_id))


NODE = node_types.register(
    NodeType(
        name="email",
        description="Send an email through the configured email backend(s). Output in "
        "`vars.email_<node id>`: {message_id, to, subject, sent_at}.",
        fields={
            "to": FieldSpec(
                False,
                "recipients",
                "Recipient: a template rendering to exactly one email address, or a list of "
                "such templates (one address each). Optional: without it, the instance's "
                "recipient's email (`{{ recipient.email }}`); an instance with neither fails.",
            ),
            "subject": FieldSpec(True, "template", "Subject line (template)."),
            "body": FieldSpec(True, "template", "Plain-text body (template)."),
            "html_body": FieldSpec(
                False, "html_template", "HTML body (template; values are HTML-escaped)."
            ),
            "from_email": FieldSpec(
                False, "template", "Sender (template); DEFAULT_FROM_EMAIL when omitted."
            ),
            "reply_to": FieldSpec(
                False, "recipients", "Reply-To: one address template or a list of them."
            ),
            "retry": RETRY_FIELD,
            "send_window": SEND_WINDOW_FIELD,
            "expires_after": EXPIRES_AFTER_FIELD,
        },
        run=execute,
        channel=CHANNEL,
        drawing=Drawing(colour="#0b6bcb", summary=partial(audience.to_summary, channel=CHANNEL)),
    )
)
