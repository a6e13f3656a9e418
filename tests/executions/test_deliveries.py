"""One recipient per address template (issue 12 item 3): rendered text is never split
into several recipients, addresses are validated, several recipients are a JSON list in
the definition, and CR/LF in a header is a permanent error."""

from __future__ import annotations

import pytest
from django.core import mail

from executions import engine
from executions.models import Delivery, DeliveryAttempt, DeliveryStatus
from executions.providers import sms
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus
from workflows.definition import DefinitionError, validate_definition

pytestmark = pytest.mark.django_db


def _email(**config) -> dict:
    base = {"to": "{{ payload.email }}", "subject": "Hi", "body": "Hello"}
    return {
        "entry_node_id": "mail",
        "nodes": [{"id": "mail", "type": "email", "config": {**base, **config}}],
        "edges": [],
    }


def _run(definition: dict, payload: dict) -> TriggerStatus:
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=definition), payload=payload
    )
    engine.step_execute(instance_id=instance.pk)
    instance.refresh_from_db()
    return instance


@pytest.mark.parametrize(
    "email",
    ["victim@x.example, attacker@y.example", "victim@x.example; attacker@y.example", "nope", ""],
)
def test_payload_cannot_add_recipients_or_bad_addresses(email, dispatched):
    instance = _run(_email(), {"email": email})
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 1
    assert instance.last_error.startswith("node mail: to:")
    assert mail.outbox == []


def test_payload_cannot_add_reply_to_addresses(dispatched):
    definition = _email(reply_to="{{ payload.reply }}")
    instance = _run(definition, {"email": "a@x.example", "reply": "b@x.example,c@y.example"})
    assert instance.status == TriggerStatus.FAILED
    assert "reply_to" in instance.last_error
    assert mail.outbox == []


def test_several_recipients_are_a_json_list_of_templates(dispatched):
    definition = _email(to=["{{ payload.email }}", "audit@example.com"])
    instance = _run(definition, {"email": "ada@example.com"})
    assert instance.status == TriggerStatus.COMPLETED
    assert mail.outbox[0].to == ["ada@example.com", "audit@example.com"]
    assert instance.vars["email_mail"]["to"] == ["ada@example.com", "audit@example.com"]


def test_recipient_list_must_hold_templates():
    for bad in ([], [""], [1], ["{{ x"]):
        with pytest.raises(DefinitionError) as caught:
            validate_definition(_email(to=bad))
        assert caught.value.field.startswith("definition.nodes[0].config.to")


@pytest.mark.parametrize("field", ["subject", "from_email"])
@pytest.mark.parametrize("value", ["Hi\rBcc: evil@x.example", "Hi\nBcc: evil@x.example"])
def test_cr_or_lf_in_a_header_is_a_permanent_error(field, value, dispatched):
    instance = _run(
        _email(**{field: "{{ payload.header }}"}),
        {
            "email": "a@x.example",
            "header": value,
        },
    )
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 1
    assert f"{field}: a header must not contain CR or LF" in instance.last_error
    assert mail.outbox == []


def _sms_definition() -> dict:
    return {
        "entry_node_id": "text",
        "nodes": [
            {"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "hi"}}
        ],
        "edges": [],
    }


@pytest.mark.parametrize(
    "phone", ["+15005550006\n+15005550007", "+1500 555 0006", "15005550006", "+0123", "x"]
)
def test_sms_to_must_be_one_e164_number(phone, dispatched):
    instance = _run(_sms_definition(), {"phone": phone})
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 1
    assert instance.last_error.startswith("node text: to:")
    assert sms.outbox == []


def test_sms_to_e164_number_is_sent(dispatched):
    instance = _run(_sms_definition(), {"phone": "+15005550006"})
    assert instance.status == TriggerStatus.COMPLETED
    assert sms.outbox[0].to == "+15005550006"


# --- the delivery guard: the row written once, with the outcome ---------------------

ONE_SMS = {
    "entry_node_id": "text",
    "edges": [],
    "nodes": [{"id": "text", "type": "sms", "config": {"to": "+15005550006", "body": "hi"}}],
}


class RecordedMeanwhileSmsBackend(sms.LocmemSmsBackend):
    """Sends, and meanwhile an earlier attempt of the same step (its lease expired while
    its provider hung) records the message sent first."""

    def send(self, message: sms.SmsMessage) -> sms.SmsSendResult:
        instance = TriggerInstance.objects.get(status=TriggerStatus.PROCESSING)
        Delivery.objects.create(
            instance=instance,
            node_id="text",
            channel="sms",
            status=DeliveryStatus.SENT,
            provider_message_id="first",
            output={"message_id": "first"},
            attempts=1,
        )
        return super().send(message)


@pytest.mark.both_databases
def test_a_send_recorded_sent_meanwhile_by_another_attempt_stays_as_that_attempt_wrote_it(
    settings,
):
    settings.SMS_BACKEND = "tests.executions.test_deliveries.RecordedMeanwhileSmsBackend"
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    engine.step_execute(instance_id=instance.pk)

    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.provider_message_id) == (DeliveryStatus.SENT, "first")
    assert delivery.output == {"message_id": "first"}
    # This attempt's provider call is on the record all the same, on that row.
    (attempt,) = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.provider == settings.SMS_BACKEND and attempt.message_id != "first"


@pytest.mark.both_databases
def test_a_send_after_a_crashed_attempt_counts_that_attempt_too():
    # A worker killed mid-send leaves the instance 'processing' and no delivery record;
    # the lease's recovery counts the attempt (attempts=1) and the next one sends.
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS), attempts=1)

    engine.step_execute(instance_id=instance.pk)

    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 2)
    assert list(
        DeliveryAttempt.objects.filter(delivery=delivery).values_list("attempt", flat=True)
    ) == [2]
