"""The Slack client (slack_sdk's WebClient, chat.postMessage) against a local fake of
Slack's Web API answering Slack's own shapes."""

from __future__ import annotations

import pytest

from executions.providers import connections
from executions.providers.chat import ChatMessage, post_chat, slack
from executions.providers.targets import TargetOutcome

BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Deploy* finished"}}]
MESSAGE = ChatMessage(text="Deploy finished", blocks=BLOCKS)


def test_a_message_is_posted_with_text_and_blocks(fake_slack):
    result = post_chat(provider="slack", channel="C0123ABC", message=MESSAGE)
    assert result.outcome == TargetOutcome.ACCEPTED and result.provider == "slack"
    channel, _, ts = result.provider_message_id.partition(":")
    assert channel == "C0123ABC" and float(ts) > 0
    assert fake_slack.received == [
        {"channel": "C0123ABC", "text": "Deploy finished", "blocks": BLOCKS}
    ]


def test_a_user_id_gets_a_direct_message_from_the_app(fake_slack):
    result = slack.post_message(channel="U0456DEF", message=ChatMessage(text="hi"))
    assert result.accepted and result.provider_message_id.startswith("D0DM0456DEF:")
    assert fake_slack.received == [{"channel": "U0456DEF", "text": "hi"}]


@pytest.mark.parametrize("error", ["channel_not_found", "is_archived", "not_in_channel"])
def test_slacks_permanent_errors_fail(fake_slack, error):
    fake_slack.script = [error]
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, error)


def test_a_wrong_bot_token_is_invalid_auth(fake_slack, settings):
    settings.NOTIFYFLOW_SLACK_BOT_TOKEN = "xoxb-revoked"
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "invalid_auth")


def test_the_rate_limit_is_retried_after_what_slack_said(fake_slack):
    fake_slack.script = ["ratelimited"]
    fake_slack.retry_after = "42"
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code, result.retry_after_s) == (
        TargetOutcome.RETRY,
        "ratelimited",
        42.0,
    )
    assert len(fake_slack.received) == 1  # the client itself retried nothing


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_with_an_html_body_is_transient(fake_slack, status):
    fake_slack.script = [status]
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, str(status))


def test_an_unreachable_slack_is_transient(fake_slack, settings):
    settings.NOTIFYFLOW_SLACK_API_URL = "http://127.0.0.1:9/api/"
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "connection_error")


def test_each_call_is_counted_as_the_connection_it_opens(fake_slack):
    before = connections.connections_opened("slack")
    for _ in range(3):
        slack.post_message(channel="C0123ABC", message=MESSAGE)
    # urllib (slack_sdk's transport) closes its connection after each call.
    assert fake_slack.connections == 3
    assert connections.connections_opened("slack") - before == 3


def test_without_a_bot_token_every_post_fails_naming_the_setting(settings):
    connections.close_all()
    settings.NOTIFYFLOW_SLACK_BOT_TOKEN = ""
    result = slack.post_message(channel="C0123ABC", message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "not_configured")
    assert "NOTIFYFLOW_SLACK_BOT_TOKEN" in result.detail
