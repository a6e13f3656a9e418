"""Chat providers: Slack (the Web API with the bot token, or an incoming webhook),
Microsoft Teams and Discord (incoming webhooks).

A chat node renders one ``ChatMessage`` and calls ``post_chat`` once per connection (or
once for the channel or webhook fixed in its config); each call returns a
``TargetResult`` (``executions.providers.targets``) and never raises for what the
service answered.
"""

from __future__ import annotations

from ..targets import TargetOutcome, TargetResult
from . import slack, webhooks
from .message import ChatMessage

PROVIDERS = webhooks.PROVIDERS


def post_chat(
    *,
    provider: str,
    message: ChatMessage,
    channel: str = "",
    webhook_url: str = "",
) -> TargetResult:
    """Post ``message`` to one connection: an incoming webhook when ``webhook_url`` is
    given (any provider), else, for Slack, ``chat.postMessage`` to ``channel`` (a
    channel or user id)."""
    if webhook_url:
        return webhooks.post(provider=provider, url=webhook_url, message=message)
    if provider == "slack" and channel:
        return slack.post_message(channel=channel, message=message)
    return TargetResult(TargetOutcome.FAILED, provider, code="no_target")


__all__ = ["PROVIDERS", "ChatMessage", "post_chat"]
