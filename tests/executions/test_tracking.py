"""ESP tracking events that opt a recipient out: anymail's ``unsubscribed``
and ``complained`` do what the email's List-Unsubscribe link does - the delivery's
recipient is opted out of the workflow's scope, with an audit row naming the source."""

from __future__ import annotations

import pytest
from anymail.signals import AnymailTrackingEvent, tracking

from executions.models import Delivery
from recipients.models import OptOut, Recipient
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from workflows.models import Workflow

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def delivery(message_id: str, *, recipient=None, categories=None) -> Delivery:
    flow = WorkflowFactory()
    if categories is not None:
        Workflow.objects.filter(pk=flow.pk).update(categories=categories)
    instance = TriggerInstanceFactory(workflow=flow, recipient=recipient)
    return Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        status="sent",
        provider_message_id=message_id,
        attempts=1,
    )


def esp_event(event_type: str, message_id: str) -> None:
    event = AnymailTrackingEvent(
        event_type=event_type, message_id=message_id, esp_event={"event": event_type}
    )
    tracking.send(sender=object, event=event, esp_name="Mailgun")


@pytest.mark.parametrize(
    ("event_type", "source"),
    [("unsubscribed", "esp_unsubscribed"), ("complained", "esp_complained")],
)
def test_an_esp_opt_out_event_opts_the_recipient_out_of_the_workflows_scope(event_type, source):
    person = RecipientFactory()
    sent = delivery("m-1", recipient=person, categories=["marketing"])
    esp_event(event_type, "m-1")
    assert Recipient.objects.get(pk=person.pk).preferences == {"categories": {"marketing": False}}
    row = OptOut.objects.get(recipient=person)
    assert (row.scope, row.source) == ("categories.marketing", source)
    assert row.details == {"provider": "mailgun", "delivery": sent.pk}
    esp_event(event_type, "m-1")  # repeated: nothing new
    assert OptOut.objects.filter(recipient=person).count() == 1


def test_without_categories_the_scope_is_the_workflow():
    person = RecipientFactory()
    sent = delivery("m-2", recipient=person)
    esp_event("unsubscribed", "m-2")
    key = sent.instance.workflow.key
    assert Recipient.objects.get(pk=person.pk).preferences == {"workflows": {key: False}}


def test_a_payload_only_delivery_or_an_unknown_message_opts_nobody_out():
    delivery("m-3")
    esp_event("complained", "m-3")
    esp_event("unsubscribed", "unknown")
    assert not OptOut.objects.exists()


def test_other_events_opt_nobody_out():
    person = RecipientFactory()
    delivery("m-4", recipient=person)
    esp_event("opened", "m-4")
    assert Recipient.objects.get(pk=person.pk).preferences == {}
