"""The ``chat`` node through the engine, against the local Slack Web API and incoming
webhook fakes with the real clients (``slack_sdk``, httpx): every connection of the
recipient for the node's provider gets the message, one delivery with a result per
connection; Slack's permanent errors fail that connection only; a webhook answering 404
or 410 has its connection removed (audited, with its event) while the others still get
it; a rate limit is retried no sooner than its ``Retry-After``; a node's own channel or
webhook posts a team alert with or without a recipient."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.models import Delivery, SkipReason, StepExecutionLog
from executions.outcomes import StepOutcome
from executions.preview import workflow_preview
from recipients.models import ChannelDataRemoval, ChatConnection
from tests.factories import (
    ChatConnectionFactory,
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
)
from tests.webhook_events import kicks, sent_to, subscribe
from triggers.models import TriggerInstance, TriggerStatus
from workflows.definition import DefinitionError

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
__all__ = ["kicks"]
PAYLOAD = {"order": 42, "total": "19.90"}
BLOCKS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*Order {{ payload.order }}* paid"}},
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "{{ payload.total }} EUR"}]},
]


def definition(**config: object) -> dict:
    return {
        "entry_node_id": "post",
        "nodes": [
            {
                "id": "post",
                "type": "chat",
                "config": {"text": "Order {{ payload.order }} paid: {{ payload.total }}", **config},
            }
        ],
        "edges": [],
    }


def instance_for(person, **config: object) -> TriggerInstance:
    flow = WorkflowFactory(definition=definition(**config))
    return TriggerInstanceFactory(workflow=flow, recipient=person, payload=dict(PAYLOAD))


def run(instance: TriggerInstance) -> StepOutcome:
    return engine.step_execute(instance_id=instance.pk)


def hook(person, fake_webhooks, provider: str) -> ChatConnection:
    return ChatConnectionFactory(
        recipient=person,
        provider=provider,
        channel=None,
        webhook_url=fake_webhooks.url(provider),
    )


def outcomes(instance: TriggerInstance) -> dict[str, str]:
    row = Delivery.objects.get(instance_id=instance.pk, node_id="post")
    return {key: result["outcome"] for key, result in (row.targets or {}).items()}


def test_every_slack_connection_gets_the_rendered_text_and_blocks(
    fake_slack, fake_webhooks, dispatched
):
    ada = RecipientFactory()
    channel = ChatConnectionFactory(recipient=ada, channel="C0ORDERS")
    user = ChatConnectionFactory(recipient=ada, slack_user=True)
    incoming = hook(ada, fake_webhooks, "slack")
    teams = hook(ada, fake_webhooks, "msteams")  # another provider: not this node's
    instance = instance_for(ada, blocks=BLOCKS)
    assert run(instance) == StepOutcome.COMPLETED

    rendered = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "*Order 42* paid"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "19.90 EUR"}]},
    ]
    # The three posts go out at once: in any order.
    assert sorted((call["channel"], call["text"]) for call in fake_slack.received) == sorted(
        [("C0ORDERS", "Order 42 paid: 19.90"), (user.user, "Order 42 paid: 19.90")]
    )
    assert all(call["blocks"] == rendered for call in fake_slack.received)
    ((provider, url, body),) = fake_webhooks.received
    assert (provider, url) == ("slack", incoming.webhook_url)
    assert body == {"text": "Order 42 paid: 19.90", "blocks": rendered}
    assert outcomes(instance) == {
        str(channel.pk): "accepted",
        str(user.pk): "accepted",
        str(incoming.pk): "accepted",
    }
    assert str(teams.pk) not in outcomes(instance)
    output = TriggerInstance.objects.get(pk=instance.pk).vars["chat_post"]
    assert (output["connections"], output["accepted"]) == (3, 3)
    assert output["message_id"].startswith("C0ORDERS:")


def test_teams_and_discord_webhooks_get_their_own_bodies(fake_webhooks, dispatched):
    ada = RecipientFactory()
    hook(ada, fake_webhooks, "msteams")
    hook(ada, fake_webhooks, "discord")
    assert run(instance_for(ada, provider="msteams")) == StepOutcome.COMPLETED
    assert run(instance_for(ada, provider="discord")) == StepOutcome.COMPLETED
    (teams, discord) = fake_webhooks.received
    card = teams[2]["attachments"][0]["content"]
    assert card["body"][0]["text"] == "Order 42 paid: 19.90"
    assert discord[2] == {"content": "Order 42 paid: 19.90", "allowed_mentions": {"parse": []}}


def test_a_slack_permanent_error_fails_that_connection_only(fake_slack, fake_webhooks, dispatched):
    ada = RecipientFactory()
    archived = ChatConnectionFactory(recipient=ada, channel="C0ARCHIVED")
    alive = hook(ada, fake_webhooks, "slack")
    fake_slack.script.append("is_archived")
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.COMPLETED
    assert outcomes(instance) == {str(archived.pk): "failed", str(alive.pk): "accepted"}
    assert ChatConnection.objects.filter(pk=archived.pk).exists()  # kept: re-invite the bot
    row = Delivery.objects.get(instance_id=instance.pk)
    assert row.targets[str(archived.pk)]["code"] == "is_archived"


def test_a_dead_webhook_is_removed_and_the_others_still_get_it(fake_webhooks, dispatched, kicks):
    removed = subscribe("recipient.connection_removed")
    ada = RecipientFactory(id="ada")
    gone, deleted, alive = (hook(ada, fake_webhooks, "slack") for _ in range(3))
    fake_webhooks.script[gone.webhook_url] = [404]
    fake_webhooks.script[deleted.webhook_url] = [410]
    instance = instance_for(ada)
    assert run(instance) == StepOutcome.COMPLETED
    assert list(ChatConnection.objects.filter(recipient=ada)) == [alive]
    assert outcomes(instance) == {
        str(gone.pk): "dead",
        str(deleted.pk): "dead",
        str(alive.pk): "accepted",
    }
    assert sorted(ChannelDataRemoval.objects.values_list("reason", "source")) == [
        # Slack's answers to a deleted webhook and to one whose channel was archived.
        ("channel_is_archived", "provider"),
        ("no_service", "provider"),
    ]
    assert {m.data["connection_id"] for m in sent_to(removed)} == {str(gone.pk), str(deleted.pk)}
    assert len(fake_webhooks.received) == 3


def test_a_slack_rate_limit_is_retried_no_sooner_than_its_retry_after(fake_slack, dispatched):
    ada = RecipientFactory()
    ChatConnectionFactory(recipient=ada)
    fake_slack.retry_after = "700"
    fake_slack.script.append("ratelimited")
    instance = instance_for(ada)
    before = timezone.now()
    assert run(instance) == StepOutcome.failed("transient")
    instance.refresh_from_db()
    assert instance.available_at >= before + timedelta(seconds=700)
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    assert run(instance) == StepOutcome.COMPLETED
    assert len(fake_slack.received) == 2


def test_a_team_alert_posts_to_the_nodes_channel_without_a_recipient(fake_slack, dispatched):
    instance = instance_for(None, channel="C0ALERTS")
    assert run(instance) == StepOutcome.COMPLETED
    (call,) = fake_slack.received
    assert call["channel"] == "C0ALERTS"
    assert outcomes(instance) == {"channel": "accepted"}


def test_a_team_alert_ignores_the_recipients_preferences_and_connections(fake_slack, dispatched):
    ada = RecipientFactory(preferences={"channels": {"chat": False}})
    ChatConnectionFactory(recipient=ada, channel="C0PERSONAL")
    assert run(instance_for(ada, channel="C0SALES")) == StepOutcome.COMPLETED
    assert [call["channel"] for call in fake_slack.received] == ["C0SALES"]


def test_a_team_alert_to_a_webhook_that_is_gone_fails_and_removes_nothing(
    fake_webhooks, dispatched
):
    url = fake_webhooks.url("slack")
    fake_webhooks.script[url] = [404]
    instance = instance_for(None, webhook_url=url)
    assert run(instance) == StepOutcome.failed("permanent")
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.FAILED
    assert not ChannelDataRemoval.objects.exists()


def test_a_webhook_url_off_the_allow_list_is_refused_at_save(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.slack.com"]
    with pytest.raises(DefinitionError, match="host_not_allowed|not allowed"):
        WorkflowFactory(definition=definition(webhook_url="https://evil.example.com/hook"))


def test_a_channel_for_another_provider_or_two_targets_fail_permanently(fake_webhooks, dispatched):
    url = fake_webhooks.url("msteams")
    for config in (
        {"provider": "msteams", "channel": "C0X"},
        {"channel": "C0X", "webhook_url": url},
    ):
        assert run(instance_for(None, **config)) == StepOutcome.failed("permanent")
    assert fake_webhooks.received == []


def test_opting_out_of_chat_skips_with_the_rule_and_no_connection_skips(fake_slack, dispatched):
    out = RecipientFactory(preferences={"categories": {"orders": {"channels": {"chat": False}}}})
    ChatConnectionFactory(recipient=out)
    flow = WorkflowFactory(definition=definition())
    flow.categories = ["orders"]
    flow.save(update_fields=["categories"])
    opted_out = TriggerInstanceFactory(workflow=flow, recipient=out, payload=dict(PAYLOAD))
    nobody = instance_for(RecipientFactory())  # no Slack connection
    no_recipient = instance_for(None)
    for instance in (opted_out, nobody, no_recipient):
        assert run(instance) == StepOutcome.COMPLETED
    logs = {
        log.trigger_id: log
        for log in StepExecutionLog.objects.filter(node_id="post").order_by("id")
    }
    assert logs[opted_out.pk].skip_reason == SkipReason.PREFERENCE_OPT_OUT
    assert logs[opted_out.pk].output["rule"] == "categories.orders.channels.chat"
    assert logs[nobody.pk].skip_reason == SkipReason.MISSING_CHANNEL_DATA
    assert logs[no_recipient.pk].skip_reason == SkipReason.MISSING_CHANNEL_DATA
    assert fake_slack.received == []


def test_the_preview_shows_what_each_target_would_get(fake_webhooks):
    flow = WorkflowFactory(definition=definition(blocks=BLOCKS, channel="C0ALERTS"))
    output = workflow_preview(key=flow.key, payload=PAYLOAD)["nodes"][0]["output"]
    ((target),) = output["targets"]
    assert target["target"] == "C0ALERTS"
    assert target["body"]["channel"] == "C0ALERTS"
    assert target["body"]["blocks"][0]["text"]["text"] == "*Order 42* paid"
    teams = WorkflowFactory(definition=definition(provider="msteams"))
    output = workflow_preview(key=teams.key, payload=PAYLOAD)["nodes"][0]["output"]
    assert output["targets"] == []
    assert output["body"]["attachments"][0]["content"]["type"] == "AdaptiveCard"
    assert not Delivery.objects.exists()
