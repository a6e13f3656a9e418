"""A provider's report that moves a delivery's tracking status up is reported as
``delivery.<status>`` in the same transaction, once per status; an ESP's complaint or
unsubscribe also reports the recipient's opt-out."""

from __future__ import annotations

import pytest
from anymail.signals import AnymailTrackingEvent
from django.db import transaction

from executions.models import Delivery
from executions.tracking import anymail_tracking_received, delivery_status_record
from tests.factories import RecipientFactory, TriggerInstanceFactory
from tests.webhook_events import kicks, sent_to, subscribe, types_in_order

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db, pytest.mark.usefixtures("kicks")]
__all__ = ["kicks"]


def sent_delivery(message_id: str, **instance_fields) -> Delivery:
    instance = TriggerInstanceFactory(**instance_fields)
    return Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        recipient="ada@example.com",
        status="sent",
        provider_message_id=message_id,
        attempts=1,
    )


def report(message_id: str, status: str | None, event: str = "") -> None:
    delivery_status_record(
        provider="mailgun",
        message_id=message_id,
        provider_event=event or status or "other",
        status=status,
        raw={"recipient": "ada@example.com"},
    )


def test_each_status_the_delivery_reaches_is_reported_once_in_order():
    endpoint = subscribe("delivery.*")
    delivery = sent_delivery("<m-1@example.org>")
    for status in ("delivered", "opened", "opened", "delivered", "clicked"):
        report("<m-1@example.org>", status)
    assert types_in_order(endpoint, delivery.instance_id) == [
        (1, "delivery.delivered"),
        (2, "delivery.opened"),
        (3, "delivery.clicked"),
    ]
    first = sent_to(endpoint)[0]
    assert first.data == {
        "instance_id": str(delivery.instance_id),
        "sequence": 1,
        "node_id": "hello",
        "channel": "email",
        "provider": "mailgun",
        "message_id": "<m-1@example.org>",
        "status": "delivered",
    }
    assert first.workflow_key == delivery.instance.workflow.key


def test_a_providers_own_sent_or_queued_is_not_reported_again():
    endpoint = subscribe("delivery.*")
    sent_delivery("<m-2@example.org>")
    report("<m-2@example.org>", "queued")
    report("<m-2@example.org>", "sent")
    report("<m-2@example.org>", None, event="deferred")
    assert not sent_to(endpoint)


def test_only_the_subscribed_statuses_are_written():
    bounces = subscribe("delivery.bounced")
    sent_delivery("<m-3@example.org>")
    report("<m-3@example.org>", "delivered")
    report("<m-3@example.org>", "bounced")
    assert [m.type for m in sent_to(bounces)] == ["delivery.bounced"]
    # An event no endpoint wanted took no number.
    assert sent_to(bounces)[0].sequence == 1


def test_an_esp_complaint_reports_the_status_and_the_opt_out():
    statuses, opt_outs = subscribe("delivery.complained"), subscribe("recipient.unsubscribed")
    person = RecipientFactory(id="ada")
    delivery = sent_delivery("<m-4@example.org>", recipient=person)
    anymail_tracking_received(
        sender=None,
        event=AnymailTrackingEvent(
            event_type="complained", message_id="<m-4@example.org>", esp_event={}
        ),
        esp_name="Mailgun",
    )
    (complained,) = sent_to(statuses)
    assert complained.instance_id == delivery.instance_id
    (unsubscribed,) = sent_to(opt_outs)
    assert unsubscribed.data == {
        "recipient": "ada",
        "scope": f"workflows.{delivery.instance.workflow.key}",
        "source": "esp_complained",
    }
    assert unsubscribed.instance_id is None and unsubscribed.sequence is None


def test_a_report_whose_transaction_rolls_back_reports_nothing():
    endpoint = subscribe("delivery.*")
    delivery = sent_delivery("<m-5@example.org>")
    with pytest.raises(RuntimeError), transaction.atomic():
        report("<m-5@example.org>", "delivered")
        raise RuntimeError("the caller failed")
    assert not sent_to(endpoint)
    report("<m-5@example.org>", "delivered")  # applied now, and reported
    assert types_in_order(endpoint, delivery.instance_id) == [(1, "delivery.delivered")]
