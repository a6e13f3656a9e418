"""Erasure is complete: after ``DELETE /recipients/carol/`` no stored
row, admin page, admin search or API answer holds Carol's email address or phone
number - idempotency keys (``erased:<instance id>``), batch and throttle keys, event
records, fan-out snapshots, interests, page titles included - while her instances keep
their ids, workflow and timeline, and Bob's rows stay byte for byte what they were.

Carol has instances finished, running (claimed by a worker), in a batch (opener and
member), throttled, waiting for an event and from a list fan-out; deliveries with a
provider's event, an event record (a key generated from her address), status webhook
messages, an opt-out, feed items, an admin log entry, and channel data - push devices
(one removed as dead: an audit row, a status event), chat connections, a payload quoting
a device token - whose tokens, keys, webhook URL and Slack user id are left nowhere
either. Bob has the same kinds, each his own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core import serializers
from django.db.models import Q
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions import engine
from executions.models import Delivery, DeliveryEvent
from executions.tracking import delivery_status_record
from feed.models import FeedCounter, FeedItem
from gates.models import Batch, ThrottleCounter
from recipients.channel_data import device_remove_dead
from recipients.models import ChannelDataRemoval, ListMembership, OptOut, PushDevice, Recipient
from recipients.unsubscribe import token_for
from status_webhooks.models import EVENT_TYPES, WebhookMessage
from tests.factories import (
    RecipientFactory,
    RecipientListFactory,
    WorkflowTriggerFactory,
    batch_definition,
    in_app_definition,
    throttle_definition,
    wait_definition,
    webpush_keys,
)
from tests.webhook_events import kicks, subscribe
from triggers.fanout import fanout_run
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.fanouts import FanOut
from triggers.models.inbox import Interest
from workflows.concurrency import Concurrency
from workflows.services import workflow_save

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.django_db,
    pytest.mark.usefixtures("kicks", "dispatched"),
]
__all__ = ["kicks"]

CAROL = {"id": "carol", "email": "carol.pii@example.com", "phone": "+15557654321"}
BOB = {"id": "bob", "email": "bob.other@example.com", "phone": "+15550002222"}
# Their channel data (PUT over the API): push tokens, a Web Push subscription, a chat
# webhook and a Slack user - none of it may be left anywhere either.
CHANNEL_DATA: dict[str, dict[str, Any]] = {
    name: {
        "push": {
            "devices": [
                {"provider": "fcm", "token": f"{name}-fcm-token-0123456789:APA91bXyZ"},
                {"provider": "apns", "token": f"{seed:02x}" * 32},
                {
                    "provider": "webpush",
                    "token": {
                        "endpoint": f"https://fcm.googleapis.com/fcm/send/{name}-subscription-42",
                        "keys": webpush_keys(seed),
                    },
                },
            ]
        },
        "chat": {
            "connections": [
                {"provider": "slack", "user": f"U{name.upper()}0001"},
                {
                    "provider": "discord",
                    "webhook_url": f"https://hooks.example.com/api/webhooks/{name}-hook-secret",
                },
            ]
        },
    }
    for name, seed in (("carol", 0xCA), ("bob", 0xB0))
}


def _secrets(person: dict) -> list[str]:
    """The person's push tokens, subscription keys, webhook URL and Slack user id."""
    data = CHANNEL_DATA[person["id"]]
    found = []
    for device in data["push"]["devices"]:
        token = device["token"]
        found += (
            [token["endpoint"], *token["keys"].values()] if isinstance(token, dict) else [token]
        )
    for connection in data["chat"]["connections"]:
        found += [value for key, value in connection.items() if key in ("user", "webhook_url")]
    return found


# An email and an SMS to the instance's recipient.
TO_THE_RECIPIENT = {
    "entry_node_id": "hello",
    "nodes": [
        {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
        {"id": "text", "type": "sms", "config": {"body": "Hi"}},
    ],
    "edges": [{"from": "hello", "to": "text"}],
}


def _workflow(key: str, definition: dict, **settings: Any):
    return workflow_save(key=key, name=key.title(), definition=definition, **settings)


@pytest.fixture
def flows():
    return {
        # The concurrency key renders the idempotency key: it holds the address too.
        "welcome": _workflow(
            "welcome",
            TO_THE_RECIPIENT,
            concurrency=Concurrency(limit=5, key="{{ trigger.idempotency_key }}"),
        ),
        "digest": _workflow("digest", batch_definition(window="1h", key="{{ recipient.email }}")),
        "capped": _workflow(
            "capped", throttle_definition(limit=1, scope="recipient", key="{{ recipient.email }}")
        ),
        "reply": _workflow("reply", wait_definition(interests=["user:{{ payload.email }}"])),
        "bell": _workflow("bell", in_app_definition(), categories=["comments"]),
        "news": _workflow("news", TO_THE_RECIPIENT, categories=["news"]),
    }


def _run(instance_id: Any, steps: int = 4) -> TriggerInstance:
    for _ in range(steps):
        instance = TriggerInstance.objects.get(pk=instance_id)
        if instance.is_terminal or instance.available_at > timezone.now():
            break
        if instance.waiting_for_event or instance.parked_on:
            break
        engine.step_execute(instance_id=instance_id)
    return TriggerInstance.objects.get(pk=instance_id)


def _trigger(api, workflow: str, key: str, person: dict, payload: dict | None = None) -> str:
    payload = {
        "name": person["id"],
        "email": person["email"],
        "phone": person["phone"],
        **(payload or {}),
    }
    body = {
        "workflow": workflow,
        "idempotency_key": key,
        "recipients": [person["id"]],
        "payload": payload,
    }
    answer = api.post("/api/v1/triggers/", body, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()["instances"][0]["id"]


def _person(api, flows, person: dict) -> dict[str, Any]:
    """Everything the test erases (or keeps) of one person: their instances by kind."""
    name, email = person["id"], person["email"]
    RecipientFactory(**person)
    for channel, body in CHANNEL_DATA[name].items():
        answer = api.put(f"/api/v1/recipients/{name}/channel-data/{channel}/", body, format="json")
        assert answer.status_code == 200, answer.content
    made: dict[str, Any] = {}
    # A payload that quotes a device token (the customer's own copy of it).
    fcm_token = CHANNEL_DATA[name]["push"]["devices"][0]["token"]
    made["device"] = _run(
        _trigger(api, "welcome", f"device-{email}", person, {"push_token": fcm_token})
    )
    # A send found the APNs token dead: an audit row and a recipient.device_removed event.
    apns = PushDevice.objects.get(recipient_id=name, provider="apns")
    assert device_remove_dead(
        device_id=apns.pk,
        provider="apns",
        reason_code="BadDeviceToken",
        details={"instance": str(made["device"].pk)},
    )
    made["finished"] = _run(_trigger(api, "welcome", f"welcome-{email}", person))
    assert made["finished"].status == TriggerStatus.COMPLETED
    delivery = Delivery.objects.get(instance=made["finished"], channel="email")
    delivery_status_record(
        provider="anymail",
        message_id=delivery.provider_message_id,
        provider_event="delivered",
        status="delivered",
        raw={"recipient": email, "note": f"delivered to {email.upper()}"},
    )
    # Running: a worker claimed its step and has not recorded it yet.
    running = _trigger(api, "welcome", f"again-{email}", person)
    assert engine.claim(instance_id=running, worker="w1") is not None
    made["running"] = running
    made["opener"] = _run(_trigger(api, "digest", f"comment-1-{email}", person))
    made["member"] = _run(_trigger(api, "digest", f"comment-2-{email}", person))
    made["passed"] = _run(_trigger(api, "capped", f"capped-1-{email}", person))
    made["throttled"] = _run(_trigger(api, "capped", f"capped-2-{email}", person))
    made["waiting"] = _run(_trigger(api, "reply", f"ask-{email}", person))
    assert made["waiting"].waiting_for_event == "reply"
    made["bell"] = _run(_trigger(api, "bell", f"bell-{email}", person, {"comment_id": 7}), steps=1)
    assert FeedItem.objects.filter(recipient_id=name).exists()
    # An event whose binding generates its key from the address.
    answer = api.post(
        "/api/v1/events/",
        {"name": "signup", "context": {"email": email, "recipients": [name]}},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    (outcome,) = answer.json()["outcomes"]
    assert email in outcome["idempotency_key"]
    # The person's own unsubscribe link (an opt-out row, a webhook message).
    token = token_for(recipient_id=name, scope="categories.news")
    assert Client().post(f"/u/{token}/", {"List-Unsubscribe": "One-Click"}).status_code == 200
    # An operator changed one of their instances: the admin's log names it by its key.
    LogEntry.objects.log_actions(
        user_id=_operator().pk,
        queryset=[made["finished"]],
        action_flag=CHANGE,
        change_message=f"Looked at {email}",
        single_object=True,
    )
    return made


def _operator():
    from django.contrib.auth.models import User

    return User.objects.get_or_create(username="olive", defaults={"is_staff": True})[0]


def _fanout(api) -> FanOut:
    RecipientListFactory(key="newsletter")
    for name in ("bob", "carol"):
        ListMembership.objects.create(list_id=_list_pk(), recipient_id=name)
    body = {
        "workflow": "news",
        "idempotency_key": "issue-7",
        "recipients": [{"list": "newsletter"}],
        "payload": {"issue": 7},
    }
    answer = api.post("/api/v1/triggers/", body, format="json")
    assert answer.status_code in (200, 201), answer.content
    fanout = FanOut.objects.get()
    assert fanout_run(fanout_id=fanout.pk) == "done"
    fanout.refresh_from_db()
    assert fanout.recipient_ids == ["bob", "carol"]
    return fanout


def _list_pk() -> int:
    from recipients.models import RecipientList

    return RecipientList.objects.get(key="newsletter").pk


# --- what is stored, shown and answered -----------------------------------------------


def _every_row() -> dict[str, str]:
    """Every row of every table (all models, every column), serialized."""
    dumped = {}
    for model in apps.get_models():
        rows = model._base_manager.all().order_by("pk")
        dumped[model._meta.label] = serializers.serialize("json", rows)
    return dumped


def _holding(text: str, person: dict) -> bool:
    lowered = text.lower()
    if person["email"] in lowered or person["phone"] in text:
        return True
    return any(secret in text for secret in _secrets(person))


def _admin_pages(client) -> dict[str, str]:
    """Every changelist of the console, and each change page of an instance."""
    pages = {}
    for model in admin.site._registry:
        meta = model._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        answer = client.get(url)
        assert answer.status_code == 200, url
        pages[url] = answer.content.decode()
    for pk in TriggerInstance.objects.values_list("pk", flat=True):
        url = reverse("admin:triggers_triggerinstance_change", args=[pk])
        answer = client.get(url)
        assert answer.status_code == 200, url
        pages[url] = answer.content.decode()
    return pages


def _api_answers(api, carol_ids: list[str], fanout: FanOut) -> dict[str, str]:
    paths = [
        "/api/v1/triggers/",
        f"/api/v1/triggers/?idempotency_key=welcome-{CAROL['email']}",
        "/api/v1/step-logs/",
        "/api/v1/batches/",
        "/api/v1/batches/?workflow=digest",
        "/api/v1/throttles/",
        "/api/v1/throttles/?recipient=carol",
        "/api/v1/recipients/",
        "/api/v1/lists/newsletter/members/",
        f"/api/v1/fanouts/{fanout.pk}/",
        "/api/v1/workflows/",
    ]
    for endpoint in api.get("/api/v1/webhook-endpoints/").json()["results"]:
        paths.append(f"/api/v1/webhook-endpoints/{endpoint['id']}/messages/")
    for pk in carol_ids:
        for view in ("", "timeline/", "steps/", "deliveries/"):
            paths.append(f"/api/v1/triggers/{pk}/{view}")
    answers = {}
    for path in paths:
        answer = api.get(path)
        assert answer.status_code == 200, (path, answer.content)
        answers[path] = answer.content.decode()
    return answers


def _bobs_rows() -> dict[str, str]:
    """Every row that is Bob's, serialized."""
    instances = list(
        TriggerInstance.objects.filter(recipient_id="bob").values_list("pk", flat=True)
    )
    assert len(instances) >= 8
    of_instances = {
        "trigger": instances,
        "instance": instances,
        "delivery__instance": instances,
    }
    dumped = {}
    for model in apps.get_models():
        fields = {f.name for f in model._meta.get_fields()}
        condition = Q(pk__in=[])
        for name, values in of_instances.items():
            if name.split("__")[0] in fields:
                condition |= Q(**{f"{name}__in": values})
        if "recipient" in fields and model is not Delivery:
            condition |= Q(recipient_id="bob")
        if model is TriggerInstance:
            condition |= Q(pk__in=instances)
        if model is Recipient:
            condition |= Q(pk="bob")
        if model is WebhookMessage:
            condition |= Q(data__recipient="bob")
        if model is ThrottleCounter:
            condition |= Q(subject="bob")
        rows = model._base_manager.filter(condition).order_by("pk")
        dumped[model._meta.label] = serializers.serialize("json", rows)
    return dumped


def test_nothing_anywhere_holds_the_erased_person(api, admin_client, flows, settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]  # chat webhooks
    subscribe(*EVENT_TYPES)
    WorkflowTriggerFactory(
        event_name="signup",
        workflow=flows["welcome"],
        idempotency_setting={"strategy": "CONTEXT_BASED", "contextFields": ["email"]},
    )
    bob = _person(api, flows, BOB)
    carol = _person(api, flows, CAROL)
    fanout = _fanout(api)
    carol_keys = dict(
        TriggerInstance.objects.filter(recipient_id="carol").values_list("pk", "idempotency_key")
    )
    carol_ids = [str(pk) for pk in carol_keys]
    # Before: she is everywhere the test looks (else it would prove nothing).
    stored = _every_row()
    for label in (
        "triggers.TriggerInstance",
        "triggers.EventRecord",
        "gates.Batch",
        "gates.ThrottleCounter",
        "triggers.Interest",
        "recipients.PushDevice",
        "recipients.ChatConnection",
        "executions.StepExecutionLog",
        "executions.Delivery",
        "executions.DeliveryEvent",
        "status_webhooks.WebhookMessage",
        "admin.LogEntry",
    ):
        assert _holding(stored[label], CAROL), label
    assert '"carol"' in stored["triggers.FanOut"]
    assert any(_holding(page, CAROL) for page in _admin_pages(admin_client).values())
    answers = _api_answers(api, carol_ids, fanout)
    assert _holding(answers[f"/api/v1/triggers/?idempotency_key=welcome-{CAROL['email']}"], CAROL)
    assert _holding(answers["/api/v1/throttles/?recipient=carol"], CAROL)
    for name in ("triggers_triggerinstance", "gates_batch"):
        url = reverse(f"admin:{name}_changelist")
        assert admin_client.get(url, {"q": CAROL["email"]}).context["cl"].result_count, name
    before = _bobs_rows()
    assert _holding(json.dumps(before), BOB)

    assert api.delete("/api/v1/recipients/carol/").status_code == 204

    stored = _every_row()
    for label, rows in stored.items():
        assert not _holding(rows, CAROL), label
    assert '"carol"' not in stored["triggers.FanOut"]
    for url, page in _admin_pages(admin_client).items():
        assert not _holding(page, CAROL), url
    for url, page in _api_answers(api, carol_ids, fanout).items():
        assert not _holding(page, CAROL), url
    # The console's searches find nothing by her address any more.
    for name in (
        "triggers_triggerinstance",
        "gates_batch",
        "triggers_fanout",
        "triggers_eventrecord",
    ):
        url = reverse(f"admin:{name}_changelist")
        answer = admin_client.get(url, {"q": CAROL["email"]})
        assert answer.context["cl"].result_count == 0, name
    assert _bobs_rows() == before
    # Her instances stay, by id, workflow and timeline, under their new keys.
    for pk, key in carol_keys.items():
        instance = TriggerInstance.objects.get(pk=pk)
        # A key holding her address is replaced; the fan-out's "issue-7" is nobody's.
        expected = f"erased:{pk}" if CAROL["email"] in key else key
        assert instance.idempotency_key == expected
        assert (instance.recipient_id, instance.recipient_erased) == (None, True)
        assert instance.is_terminal
        timeline = api.get(f"/api/v1/triggers/{pk}/timeline/").json()
        assert timeline
    assert TriggerInstance.objects.get(pk=carol["running"]).status == TriggerStatus.CANCELLED
    assert not Batch.objects.filter(key__icontains="carol").exists()
    assert not ThrottleCounter.objects.filter(subject="carol").exists()
    assert not Interest.objects.filter(subject__icontains="carol").exists()
    assert not FeedItem.objects.filter(recipient_id="carol").exists()
    assert not FeedCounter.objects.filter(recipient_id="carol").exists()
    assert not OptOut.objects.filter(recipient_id="carol").exists()
    assert not PushDevice.objects.filter(recipient_id="carol").exists()
    assert not ChannelDataRemoval.objects.filter(recipient_id="carol").exists()
    # Her device_removed event stays (the customer learnt it), without naming her.
    assert WebhookMessage.objects.filter(type="recipient.device_removed").count() == 2
    assert DeliveryEvent.objects.filter(delivery__instance_id=carol["finished"].pk).exists()
    fanout.refresh_from_db()
    assert fanout.recipient_ids == ["bob"] and fanout.position == 1
    assert bob["finished"].idempotency_key == f"welcome-{BOB['email']}"
    assert ContentType.objects.exists()
