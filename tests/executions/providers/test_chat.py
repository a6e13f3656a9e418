"""``post_chat``: one call per connection, to its webhook or, for Slack, the channel or
user through the bot token."""

from __future__ import annotations

from executions.providers.chat import ChatMessage, post_chat
from executions.providers.targets import TargetOutcome

MESSAGE = ChatMessage(text="Deploy finished")


def test_a_person_s_connections_each_get_the_message(fake_slack, fake_webhooks):
    connections = [
        {"provider": "slack", "channel": "U0456DEF"},
        {"provider": "slack", "webhook_url": fake_webhooks.url("slack")},
        {"provider": "msteams", "webhook_url": fake_webhooks.url("msteams")},
        {"provider": "discord", "webhook_url": fake_webhooks.url("discord")},
    ]
    results = [post_chat(message=MESSAGE, **connection) for connection in connections]
    assert [(r.provider, r.outcome) for r in results] == [
        ("slack", TargetOutcome.ACCEPTED),
        ("slack", TargetOutcome.ACCEPTED),
        ("msteams", TargetOutcome.ACCEPTED),
        ("discord", TargetOutcome.ACCEPTED),
    ]
    assert [arguments["channel"] for arguments in fake_slack.received] == ["U0456DEF"]
    assert [provider for provider, _, _ in fake_webhooks.received] == [
        "slack",
        "msteams",
        "discord",
    ]


def test_a_connection_with_neither_channel_nor_webhook_has_no_target():
    for provider in ("slack", "msteams"):
        result = post_chat(provider=provider, message=MESSAGE)
        assert (result.outcome, result.code) == (TargetOutcome.FAILED, "no_target")
