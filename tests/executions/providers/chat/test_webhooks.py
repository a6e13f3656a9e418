"""Incoming webhooks of Slack, Teams and Discord (httpx, kept alive) against a local fake
answering each service's shapes: dead webhooks (404/410), rate limits, server errors."""

from __future__ import annotations

import pytest

from executions.providers import connections
from executions.providers.chat import ChatMessage, post_chat, webhooks
from executions.providers.targets import TargetOutcome

BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy* finished"}}]
MESSAGE = ChatMessage(text="Deploy finished @everyone", blocks=BLOCKS)


def test_each_service_gets_its_own_body(fake_webhooks):
    for provider in ("slack", "msteams", "discord"):
        result = post_chat(
            provider=provider, webhook_url=fake_webhooks.url(provider), message=MESSAGE
        )
        assert (result.outcome, result.provider) == (TargetOutcome.ACCEPTED, provider)
    slack_body, teams_body, discord_body = (body for _, _, body in fake_webhooks.received)
    assert slack_body == {"text": "Deploy finished @everyone", "blocks": BLOCKS}
    card = teams_body["attachments"][0]
    assert teams_body["type"] == "message"
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["body"] == [
        {"type": "TextBlock", "text": "Deploy finished @everyone", "wrap": True}
    ]
    # Rendered text must not ping a whole Discord server.
    assert discord_body == {
        "content": "Deploy finished @everyone",
        "allowed_mentions": {"parse": []},
    }


@pytest.mark.parametrize("provider", ["slack", "msteams", "discord"])
@pytest.mark.parametrize("status", [404, 410])
def test_a_deleted_webhook_is_dead(fake_webhooks, provider, status):
    fake_webhooks.script[""] = [status]
    result = webhooks.post(provider=provider, url=fake_webhooks.url(provider), message=MESSAGE)
    assert result.outcome == TargetOutcome.DEAD


def test_the_services_error_code_is_kept(fake_webhooks):
    fake_webhooks.script[""] = [404, 410, 404, 410]
    codes = [
        webhooks.post(provider=p, url=fake_webhooks.url(p), message=MESSAGE).code
        for p in ("slack", "slack", "discord", "discord")
    ]
    # Discord's code 0 ("general error") names nothing: the status stands for it.
    assert codes == ["no_service", "channel_is_archived", "10015", "410"]


@pytest.mark.parametrize("provider", ["slack", "msteams", "discord"])
def test_a_rate_limit_is_retried_after_what_the_service_said(fake_webhooks, provider):
    fake_webhooks.script[""] = [(429, {"Retry-After": "7"})]
    result = webhooks.post(provider=provider, url=fake_webhooks.url(provider), message=MESSAGE)
    assert (result.outcome, result.retry_after_s) == (TargetOutcome.RETRY, 7.0)


@pytest.mark.parametrize("provider", ["slack", "msteams", "discord"])
def test_a_server_error_is_transient(fake_webhooks, provider):
    fake_webhooks.script[""] = [500]
    result = webhooks.post(provider=provider, url=fake_webhooks.url(provider), message=MESSAGE)
    assert result.outcome == TargetOutcome.RETRY


def test_a_refused_payload_fails_and_keeps_the_webhook(fake_webhooks):
    fake_webhooks.script[""] = [400, 400]
    slack = webhooks.post(provider="slack", url=fake_webhooks.url("slack"), message=MESSAGE)
    discord = webhooks.post(provider="discord", url=fake_webhooks.url("discord"), message=MESSAGE)
    assert (slack.outcome, slack.code) == (TargetOutcome.FAILED, "invalid_payload")
    assert (discord.outcome, discord.code) == (TargetOutcome.FAILED, "50035")


def test_discord_text_is_cut_to_its_limit(fake_webhooks):
    long = ChatMessage(text="x" * 2500)
    assert webhooks.post(
        provider="discord", url=fake_webhooks.url("discord"), message=long
    ).accepted
    assert len(fake_webhooks.received[0][2]["content"]) == webhooks.DISCORD_CONTENT_LIMIT


def test_many_posts_share_one_kept_alive_connection(fake_webhooks):
    before = connections.connections_opened("discord")
    url = fake_webhooks.url("discord")
    assert all(
        webhooks.post(provider="discord", url=url, message=MESSAGE).accepted for _ in range(12)
    )
    assert fake_webhooks.connections == 1
    assert connections.connections_opened("discord") - before == 1


def test_an_unreachable_webhook_is_transient(fake_webhooks):
    result = webhooks.post(provider="msteams", url="http://127.0.0.1:9/hook", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "connection_error")


def test_only_allowed_http_urls_of_known_services_are_posted_to(fake_webhooks):
    assert webhooks.post(provider="slack", url="file:///etc/passwd", message=MESSAGE).code == (
        "invalid_url"
    )
    elsewhere = fake_webhooks.url("slack").replace("127.0.0.1", "localhost")
    refused = webhooks.post(provider="slack", url=elsewhere, message=MESSAGE)
    assert (refused.outcome, refused.code) == (TargetOutcome.FAILED, "host_not_allowed")
    assert "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS" in refused.detail
    assert webhooks.post(provider="irc", url=fake_webhooks.url("slack"), message=MESSAGE).code == (
        "unknown_provider"
    )
    assert fake_webhooks.received == []


def test_a_redirect_is_not_followed(fake_webhooks):
    fake_webhooks.script[""] = [(302, {"Location": "http://127.0.0.1:9/elsewhere"})]
    result = webhooks.post(provider="slack", url=fake_webhooks.url("slack"), message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "302")
