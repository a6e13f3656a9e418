"""``chat``: a message to Slack, Microsoft Teams or Discord (``executions.providers.chat``):
to each of the recipient's connections for the node's ``provider``, or - a team alert,
with or without a recipient - to the node's own Slack ``channel`` or incoming
``webhook_url``. One delivery with a result per connection (``executions.target_sends``).

To the recipient's connections: under their preferences (channel ``chat``), the node's
send window and their quiet hours; an incoming webhook answering 404 or 410 has its
connection removed (``connection_remove_dead``: audited, a
``recipient.connection_removed`` event) while the others still get the message; Slack's
permanent errors (``channel_not_found``, ``is_archived``, ``invalid_auth``, ...) fail
that connection only. No connection for the provider, or every one dead: skipped
``missing_channel_data``.

To the node's own channel or URL: not the recipient's, so neither their preferences nor
their quiet hours apply (the send window does, in UTC or its own time zone), and a dead
webhook is a permanent failure for the workflow's author to fix."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from recipients.channel_data import connection_remove_dead, connection_secrets
from recipients.models import ChatConnection, short_secret
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
from ..models import SkipReason
from ..providers.base import ProviderError
from ..providers.chat import PROVIDERS, ChatMessage, post_chat
from ..providers.chat.webhooks import webhook_body
from ..providers.targets import TargetResult
from ..step import NodeResult, StepContext
from ..target_sends import AllTargetsDead, Target, send_to_targets
from .emit import _render_value

CHANNEL = "chat"


def execute(step: StepContext) -> NodeResult:
    message = _message(step)
    provider = step.config.get("provider") or PROVIDERS[0]
    fixed = _fixed_target(step, provider)
    if step.preview:  # sends nothing: what each connection would receive
        return NodeResult(output=_preview(step, provider, message, fixed), vars_key=_key(step))
    rule = None
    if fixed is not None:
        targets = [fixed]
        deferred = audience.send_window_gate(step, CHANNEL, to_recipient=False)
    else:
        skip, rule = audience.preference(step, CHANNEL)
        if skip is not None:
            return skip
        targets = [_target(row) for row in _connections(step, provider)]
        if not targets and step.delivery.status is None:
            return audience.skipped(step, CHANNEL, SkipReason.MISSING_CHANNEL_DATA)
        deferred = audience.send_window_gate(step, CHANNEL)
    if deferred is not None:
        return deferred
    try:
        output = send_to_targets(
            step=step,
            channel=CHANNEL,
            targets=targets,
            send=partial(_send, message),
            remove_dead=partial(_remove_dead, step),
            noun="connection",
        )
    except AllTargetsDead as dead:
        skipped = audience.skipped(step, CHANNEL, SkipReason.MISSING_CHANNEL_DATA)
        skipped.output["removed"] = dead.removed
        return skipped
    return NodeResult(output=audience.with_rule(output, rule), vars_key=_key(step))


def _key(step: StepContext) -> str:
    return NODE.vars_key(step.node_id)


def _message(step: StepContext) -> ChatMessage:
    """The text (must not render empty) and the blocks, rendered."""
    text = step.render("text").strip()
    if not text:
        raise ProviderError("text: renders to nothing", permanent=True)
    blocks = _render_value(step.config.get("blocks") or [], step, "blocks")
    return ChatMessage(text=text, blocks=tuple(blocks))


def _fixed_target(step: StepContext, provider: str) -> Target | None:
    """The node's own ``channel`` (Slack) or ``webhook_url``, rendered; None when it has
    neither (the recipient's connections). A permanent ProviderError for both, or a
    channel with another provider than Slack."""
    channel = (step.render_optional("channel") or "").strip()
    url = (step.render_optional("webhook_url") or "").strip()
    if channel and url:
        raise ProviderError("channel, webhook_url: give one of them, not both", permanent=True)
    if channel:
        if provider != "slack":
            raise ProviderError(
                f"channel: only Slack posts to a channel; {provider} takes a webhook_url",
                permanent=True,
            )
        address = {"channel": channel}
        return Target(
            id="channel", provider=provider, label=channel, address=address, removable=False
        )
    if url:
        host = urlsplit(url).hostname or "?"
        address = {"webhook_url": url}
        return Target(id="webhook", provider=provider, label=host, address=address, removable=False)
    return None


def _connections(step: StepContext, provider: str) -> list[ChatConnection]:
    person = step.audience.recipient
    if person is None:
        return []
    # chatconnection's recipient index: one person's rows.
    rows = ChatConnection.objects.filter(recipient_id=person.id, provider=provider)
    return list(rows.order_by("created_at", "id"))


def _target(row: ChatConnection) -> Target:
    if row.webhook_url:
        return Target(
            id=str(row.pk),
            provider=row.provider,
            label=row.webhook_host or "?",
            address={"webhook_url": row.webhook_url},
            secrets=tuple(connection_secrets(row)),
        )
    # A Slack channel, or a user (a direct message from the app): chat.postMessage.
    channel = row.channel or row.user or ""
    label = row.channel or short_secret(row.user or "")
    return Target(
        id=str(row.pk),
        provider=row.provider,
        label=label,
        address={"channel": channel},
        secrets=tuple(connection_secrets(row)),
    )


def _send(message: ChatMessage, target: Target) -> TargetResult:
    return post_chat(provider=target.provider, message=message, **target.address)


def _remove_dead(step: StepContext, target: Target, result: TargetResult) -> bool:
    return connection_remove_dead(
        connection_id=target.id,
        reason_code=result.code,
        details={"instance": str(step.instance_id), "node": step.node_id},
    )


def _preview(
    step: StepContext, provider: str, message: ChatMessage, fixed: Target | None
) -> dict[str, Any]:
    """What a send would post: Slack's ``chat.postMessage`` arguments, or the incoming
    webhook's body, per target (the recipient's connections: none without one)."""
    targets = [fixed] if fixed is not None else [_target(r) for r in _connections(step, provider)]
    return {
        "preview": True,
        "channel": CHANNEL,
        "provider": provider,
        "targets": [
            {"id": target.id, "target": target.label, "body": _body(target, message)}
            for target in targets
        ],
        "body": _body(None, message) if provider == "slack" else webhook_body(provider, message),
    }


def _body(target: Target | None, message: ChatMessage) -> dict[str, Any]:
    if target is not None and "webhook_url" in target.address:
        return webhook_body(target.provider, message)
    arguments: dict[str, Any] = {"text": message.text}
    if target is not None:
        arguments = {"channel": target.address["channel"], **arguments}
    if message.blocks:
        arguments["blocks"] = [dict(block) for block in message.blocks]
    return arguments


def _summary(config: Mapping[str, Any]) -> str:
    provider = config.get("provider") or PROVIDERS[0]
    channel = config.get("channel")
    if isinstance(channel, str) and channel:
        return f"{provider} {channel}"
    if config.get("webhook_url"):
        return f"{provider} webhook"
    return f"{provider}: recipient's connections"


NODE = node_types.register(
    NodeType(
        name="chat",
        description="Post a message to Slack, Microsoft Teams or Discord: to each of the "
        "recipient's connections for `provider`, or to the node's own Slack `channel` or "
        "`webhook_url` (a team alert). One delivery with a result per connection; a dead "
        "webhook's connection is removed. Output in `vars.chat_<node id>`: {connections, "
        "accepted, removed, failed, message_id, sent_at}.",
        fields={
            "text": FieldSpec(
                True,
                "template",
                "The message (template; Slack mrkdwn; the notification text when there are "
                "blocks); must not render empty.",
            ),
            "blocks": FieldSpec(
                False,
                "template_object_list",
                "Slack Block Kit blocks (a JSON array; string values are templates); Slack "
                "only, Teams and Discord get the text.",
            ),
            "provider": FieldSpec(
                False,
                "choice",
                "Which chat app: slack (default), msteams or discord.",
                choices=PROVIDERS,
            ),
            "channel": FieldSpec(
                False,
                "template",
                "A Slack channel id (or user id) to post to with the bot token, instead of "
                "the recipient's connections.",
            ),
            "webhook_url": FieldSpec(
                False,
                "webhook_url",
                "An incoming webhook to post to instead of the recipient's connections; its "
                "host must be in NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (checked at save and at "
                "send).",
            ),
            "retry": RETRY_FIELD,
            "send_window": SEND_WINDOW_FIELD,
            "expires_after": EXPIRES_AFTER_FIELD,
        },
        run=execute,
        channel=CHANNEL,
        drawing=Drawing(colour="#4a154b", summary=_summary, mermaid=("[[", "]]")),
    )
)
