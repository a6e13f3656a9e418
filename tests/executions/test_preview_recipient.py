"""A preview for a chosen recipient: their data in the templates, what each node would
do for them (preferences, quiet hours, devices, gates), nothing sent or written."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.utils import timezone

from executions.preview import workflow_preview
from gates.models import Batch, ThrottleCounter
from notifyflow.errors import NotFoundError
from tests.factories import (
    BatchInstanceFactory,
    PushDeviceFactory,
    RecipientFactory,
    ThrottleCounterFactory,
    WorkflowFactory,
    batch_definition,
    throttle_definition,
)
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

TO_RECIPIENT = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {
                "subject": "Hi {{ recipient.properties.name }} ({{ recipient.locale }})",
                "body": "For {{ recipient.email }}",
            },
        },
        {"id": "text", "type": "sms", "config": {"body": "Hi"}},
        {"id": "buzz", "type": "push", "config": {"title": "Hi", "body": "There"}},
    ],
    "edges": [{"from": "hello", "to": "text"}, {"from": "text", "to": "buzz"}],
}


def nodes_by_id(result: dict) -> dict[str, dict]:
    return {node["node_id"]: node for node in result["nodes"]}


def test_renders_for_the_recipient_and_says_each_node_would_send():
    workflow = WorkflowFactory(definition=TO_RECIPIENT)
    person = RecipientFactory(id="ada", locale="fr", properties={"name": "Ada"})
    PushDeviceFactory(recipient=person)

    result = workflow_preview(key=workflow.key, payload={}, recipient_id="ada")

    assert result["recipient"]["email"] == "ada@example.com"
    nodes = nodes_by_id(result)
    assert nodes["hello"]["rendered"]["subject"] == "Hi Ada (fr)"
    assert nodes["hello"]["recipient"] == {
        "would_send": True,
        "rule": "default",
        "to": ["ada@example.com"],
    }
    assert nodes["text"]["recipient"]["would_send"] is True
    assert len(nodes["buzz"]["output"]["devices"]) == 1
    assert nodes["buzz"]["recipient"]["would_send"] is True
    assert mail.outbox == []
    assert not TriggerInstance.objects.exists()


def test_shows_a_channel_the_recipient_opted_out_of_and_one_without_an_address():
    workflow = WorkflowFactory(definition=TO_RECIPIENT)
    RecipientFactory(
        id="bo", phone=None, properties={"name": "Bo"}, preferences={"channels": {"email": False}}
    )

    nodes = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="bo"))

    assert nodes["hello"]["recipient"] == {
        "would_send": False,
        "skip_reason": "preference_opt_out",
        "rule": "channels.email",
    }
    assert nodes["text"]["recipient"]["skip_reason"] == "missing_channel_data"
    # No device: a push node would skip too.
    assert nodes["buzz"]["recipient"]["skip_reason"] == "missing_channel_data"


def test_shows_the_deferral_of_quiet_hours():
    workflow = WorkflowFactory(definition=TO_RECIPIENT)
    # Quiet all day but one minute: whenever the test runs, now is (almost surely) quiet.
    now = timezone.now().astimezone(timezone.get_fixed_timezone(0))
    start = (now + timezone.timedelta(minutes=2)).strftime("%H:%M")
    until = (now + timezone.timedelta(minutes=1)).strftime("%H:%M")
    RecipientFactory(
        id="cy",
        properties={"name": "Cy"},
        timezone="UTC",
        preferences={"quiet_hours": {"from": start, "until": until}},
    )

    nodes = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="cy"))

    hello = nodes["hello"]["recipient"]
    assert hello["would_send"] is True
    assert hello["deferred_until"] > now.isoformat()
    assert "quiet" in hello["deferral_reason"]


def test_throttle_says_whether_it_would_pass_without_taking_a_slot():
    workflow = WorkflowFactory(definition=throttle_definition(limit=2, window="1h"))
    RecipientFactory(id="di")
    subject = f"{workflow.key}:gate"
    now_ms = int(time.time() * 1000)
    ThrottleCounterFactory(subject=subject, hits=[now_ms - 1000])

    first = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="di"))
    assert first["gate"]["recipient"] == {
        "gate": "throttle",
        "key": "",
        "count": 1,
        "limit": 2,
        "would_pass": True,
    }
    assert ThrottleCounter.objects.get(subject=subject).hits == [now_ms - 1000]

    ThrottleCounter.objects.filter(subject=subject).update(hits=[now_ms - 2000, now_ms - 1000])
    full = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="di"))
    assert full["gate"]["recipient"]["would_pass"] is False
    assert "room_at" in full["gate"]["recipient"]


def test_batch_names_the_open_batch_the_instance_would_join():
    opener = BatchInstanceFactory(recipient=RecipientFactory(id="ed"))
    workflow = opener.workflow
    alone = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="ed"))
    assert alone["collect"]["recipient"]["joins"] is None

    now = timezone.now()
    batch = Batch.objects.create(
        workflow=workflow,
        node_id="collect",
        recipient_id="ed",
        key="",
        opener=opener,
        opened_at=now,
        closes_at=now + timezone.timedelta(minutes=1),
        item_count=1,
    )
    joined = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="ed"))
    assert joined["collect"]["recipient"]["joins"] == str(batch.pk)
    assert Batch.objects.get(pk=batch.pk).item_count == 1


def test_a_scheduled_batch_would_close_at_the_recipients_next_cron_time():
    schedule = {"cron": "0 9 * * *"}
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=schedule))
    RecipientFactory(id="tokyo", timezone="Asia/Tokyo")
    outcome = nodes_by_id(workflow_preview(key=workflow.key, payload={}, recipient_id="tokyo"))
    closes = datetime.fromisoformat(outcome["collect"]["recipient"]["closes_at"])
    local = closes.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute) == (9, 0)
    assert timedelta(0) < closes - timezone.now() <= timedelta(days=1)


def test_unknown_recipient_is_not_found():
    workflow = WorkflowFactory(definition=TO_RECIPIENT)
    with pytest.raises(NotFoundError) as error:
        workflow_preview(key=workflow.key, payload={}, recipient_id="nobody")
    assert error.value.field == "recipient_id"
