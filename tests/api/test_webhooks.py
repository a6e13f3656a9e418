"""Delivery status webhooks: anymail's tracking webhooks (Mailgun, Postmark
payload shapes from anymail's own tests) and Twilio's signed status callback update the
delivery by provider message id, never backwards, keep the raw event, and deliver
``delivery.<status>`` to the instance's inbox, where a wait node can branch on it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from django.utils import timezone
from twilio.request_validator import RequestValidator

from executions import engine
from executions.models import Delivery, DeliveryEvent
from executions.outcomes import StepOutcome
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.inbox import InboxEvent

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

BASIC = "Basic " + base64.b64encode(b"hook:s3cret").decode()
SIGNING_KEY = "TEST_WEBHOOK_SIGNING_KEY"
TWILIO_TOKEN = "twilio-secret"

OPENED_BRANCH = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {"to": "{{ payload.email }}", "subject": "Hi", "body": "Hello"},
        },
        {"id": "listen", "type": "wait", "config": {"event": "delivery.opened", "timeout": "24h"}},
        {
            "id": "thanks",
            "type": "email",
            "config": {"to": "ops@example.com", "subject": "s", "body": "b"},
        },
        {"id": "nudge", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "?"}},
    ],
    "edges": [
        {"from": "hello", "to": "listen"},
        {"from": "listen", "to": "thanks", "condition": "vars.wait_listen.received"},
        {"from": "listen", "to": "nudge"},
    ],
}


@pytest.fixture(autouse=True)
def webhook_settings(settings):
    settings.ANYMAIL = {"WEBHOOK_SECRET": "hook:s3cret", "MAILGUN_WEBHOOK_SIGNING_KEY": SIGNING_KEY}
    settings.TWILIO_AUTH_TOKEN = TWILIO_TOKEN


def sent_delivery(message_id: str, channel: str = "email") -> Delivery:
    instance = TriggerInstanceFactory()
    return Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel=channel,
        status="sent",
        provider_message_id=message_id,
        attempts=1,
    )


def postmark(client, record_type: str, message_id: str, auth: str = BASIC):
    # Shapes from anymail's tests/test_postmark_webhooks.py.
    events = {
        "Delivery": {
            "RecordType": "Delivery",
            "ServerId": 23,
            "MessageID": message_id,
            "Recipient": "recipient@example.com",
            "Tag": "welcome-email",
            "DeliveredAt": "2014-08-01T13:28:10.2735393-04:00",
            "Details": "Test delivery webhook details",
        },
        "Open": {
            "RecordType": "Open",
            "FirstOpen": True,
            "Client": {"Name": "Gmail", "Company": "Google", "Family": "Gmail"},
            "Platform": "Unknown",
            "UserAgent": "Mozilla/5.0",
            "ReadSeconds": 0,
            "Geo": {},
            "MessageID": message_id,
            "ReceivedAt": "2016-04-27T16:21:41.2493688-04:00",
            "Recipient": "recipient@example.com",
        },
    }
    return client.post(
        "/webhooks/anymail/postmark/tracking/",
        data=json.dumps(events[record_type]),
        content_type="application/json",
        HTTP_AUTHORIZATION=auth,
    )


def mailgun(client, event: str, message_id: str, **extra):
    # Shape from anymail's tests/test_mailgun_webhooks.py (new-style webhooks), signed.
    timestamp, token = "1534108637", "651869375b9df3c98fc15c4889b102119add1235c38fc92824"
    signature = hmac.new(
        SIGNING_KEY.encode(), f"{timestamp}{token}".encode(), hashlib.sha256
    ).hexdigest()
    payload = {
        "signature": {"timestamp": timestamp, "token": token, "signature": signature},
        "event-data": {
            "event": event,
            "timestamp": 1534108637.153125,
            "id": "hTWCTD81RtiDN-...",
            "recipient": "recipient@example.com",
            "message": {
                "headers": {
                    "to": "recipient@example.com",
                    "message-id": message_id,
                    "from": "test@example.org",
                    "subject": "Testing",
                }
            },
            **extra,
        },
    }
    return client.post(
        "/webhooks/anymail/mailgun/tracking/",
        data=json.dumps(payload),
        content_type="application/json",
        HTTP_AUTHORIZATION=BASIC,
    )


def inbox_names(instance_id) -> list[str]:
    return list(
        InboxEvent.objects.filter(instance_id=instance_id)
        .order_by("id")
        .values_list("name", flat=True)
    )


def test_postmark_delivery_and_open_update_the_delivery_and_reach_the_inbox(client):
    delivery = sent_delivery("883953f4-6105-42a2-a16a-77a8eac79483")
    assert postmark(client, "Delivery", delivery.provider_message_id).status_code == 200
    assert postmark(client, "Open", delivery.provider_message_id).status_code == 200
    delivery.refresh_from_db()
    assert delivery.tracking_status == "opened"
    events = list(DeliveryEvent.objects.filter(delivery=delivery).order_by("id"))
    assert [(e.provider, e.provider_event, e.status, e.applied) for e in events] == [
        ("postmark", "delivered", "delivered", True),
        ("postmark", "opened", "opened", True),
    ]
    assert events[1].raw["RecordType"] == "Open"  # the raw event is kept
    assert inbox_names(delivery.instance_id) == ["delivery.delivered", "delivery.opened"]
    opened = InboxEvent.objects.get(instance_id=delivery.instance_id, name="delivery.opened")
    assert opened.context == {
        "node_id": "hello",
        "channel": "email",
        "message_id": delivery.provider_message_id,
        "provider": "postmark",
    }


def test_mailgun_out_of_order_and_repeated_calls_are_harmless(client):
    delivery = sent_delivery("<20180812211713.1.DF5966851B4BAA99@example.org>")
    bare = "20180812211713.1.DF5966851B4BAA99@example.org"  # anymail adds the <>
    for event in ("opened", "opened", "delivered", "opened"):
        assert mailgun(client, event, bare).status_code == 200
    delivery.refresh_from_db()
    assert delivery.tracking_status == "opened"  # never back to "delivered"
    assert list(
        DeliveryEvent.objects.filter(delivery=delivery)
        .order_by("id")
        .values_list("status", "applied")
    ) == [("opened", True), ("opened", False), ("delivered", False), ("opened", False)]
    assert inbox_names(delivery.instance_id) == ["delivery.opened"]
    # A permanent failure outranks the engagement; nothing after it but a complaint.
    mailgun(client, "failed", bare, severity="permanent", reason="bounce")
    mailgun(client, "clicked", bare)
    delivery.refresh_from_db()
    assert delivery.tracking_status == "bounced"
    assert inbox_names(delivery.instance_id) == ["delivery.opened", "delivery.bounced"]


def test_webhook_without_valid_auth_changes_nothing(client):
    delivery = sent_delivery("abc")
    response = postmark(client, "Open", "abc", auth="Basic " + base64.b64encode(b"x:y").decode())
    assert response.status_code == 400
    assert mailgun(client, "opened", "unknown-id@x").status_code == 200  # unknown id: ignored
    delivery.refresh_from_db()
    assert delivery.tracking_status == "" and not DeliveryEvent.objects.exists()


def twilio_callback(client, params: dict, signature: str | None):
    headers = {} if signature is None else {"HTTP_X_TWILIO_SIGNATURE": signature}
    return client.post("/webhooks/twilio/status/", data=params, **headers)


def test_twilio_status_callback_must_be_signed(client):
    delivery = sent_delivery("SM" + "a" * 32, channel="sms")
    params = {"MessageSid": delivery.provider_message_id, "MessageStatus": "delivered"}
    url = "http://testserver/webhooks/twilio/status/"
    assert twilio_callback(client, params, None).status_code == 403
    wrong = RequestValidator("not-our-token").compute_signature(url, params)
    assert twilio_callback(client, params, wrong).status_code == 403
    delivery.refresh_from_db()
    assert delivery.tracking_status == ""
    good = RequestValidator(TWILIO_TOKEN).compute_signature(url, params)
    assert twilio_callback(client, params, good).status_code == 204
    delivery.refresh_from_db()
    assert delivery.tracking_status == "delivered"
    assert DeliveryEvent.objects.get(delivery=delivery).raw == params
    assert inbox_names(delivery.instance_id) == ["delivery.delivered"]
    # "sent" arriving after "delivered" is recorded, not applied.
    late = {**params, "MessageStatus": "sent"}
    signed = RequestValidator(TWILIO_TOKEN).compute_signature(url, late)
    assert twilio_callback(client, late, signed).status_code == 204
    delivery.refresh_from_db()
    assert delivery.tracking_status == "delivered"


def test_wait_node_takes_the_opened_branch_from_a_tracking_webhook(
    client, dispatched, django_capture_on_commit_callbacks
):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=OPENED_BRANCH))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    message_id = Delivery.objects.get(instance=instance, node_id="hello").provider_message_id
    assert message_id == f"<{instance.pk}.hello@notifyflow>"  # our Message-ID (SMTP/locmem)
    with django_capture_on_commit_callbacks(execute=True):
        assert postmark(client, "Open", message_id).status_code == 200
    instance.refresh_from_db()
    assert instance.available_at <= timezone.now()  # woken at once, not at the timeout
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.current_node_id == "thanks"
    event = instance.vars["wait_listen"]["event"]
    assert event["name"] == "delivery.opened"
    assert event["context"]["channel"] == "email" and event["context"]["node_id"] == "hello"
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.COMPLETED


def test_a_mailgun_complaint_opts_the_recipient_out(client):
    """Over HTTP, as the ESP sends it: a spam complaint about a recipient's email opts
    them out of the workflow's scope (audit source esp_complained)."""
    from recipients.models import OptOut
    from tests.factories import RecipientFactory

    person = RecipientFactory()
    instance = TriggerInstanceFactory(recipient=person)
    Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        status="sent",
        provider_message_id="<complaint-1@example.org>",
        attempts=1,
    )
    assert mailgun(client, "complained", "complaint-1@example.org").status_code == 200
    row = OptOut.objects.get(recipient=person)
    assert (row.scope, row.source) == (f"workflows.{instance.workflow.key}", "esp_complained")
