"""The SMS node and its recipient: `to` defaults to the recipient's phone read
when the step runs (sent through the real twilio client to a fake Twilio), preferences
decide per channel, and a recipient without a phone is a skip, not a failure."""

from __future__ import annotations

import pytest

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from executions.providers import sms
from recipients.models import Recipient
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from tests.fake_twilio import FakeTwilio
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

TEXT_THE_RECIPIENT = {
    "entry_node_id": "text",
    "nodes": [{"id": "text", "type": "sms", "config": {"body": "Hi {{ recipient.id }}"}}],
    "edges": [],
}


@pytest.fixture
def twilio(settings):
    with FakeTwilio() as fake:
        settings.NOTIFYFLOW_SMS_BACKENDS = [
            {
                "name": "twilio",
                "backend": "twilio",
                "options": {
                    "account_sid": "AC" + "0" * 32,
                    "auth_token": "secret",
                    "from_number": "+15550001111",
                    "api_base_url": fake.url,
                },
            }
        ]
        yield fake


def run(instance: TriggerInstance) -> StepOutcome:
    return engine.step_execute(instance_id=instance.pk)


def log_of(instance: TriggerInstance) -> StepExecutionLog:
    return StepExecutionLog.objects.filter(trigger_id=instance.pk).latest("id")


def test_an_sms_without_to_goes_to_the_recipients_phone_read_when_the_step_runs(twilio, dispatched):
    person = RecipientFactory(id="ada", phone="+15550000001")
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=TEXT_THE_RECIPIENT), recipient=person
    )
    Recipient.objects.filter(pk="ada").update(phone="+15550000002")  # changed since
    assert run(instance) == StepOutcome.COMPLETED
    assert [(m["To"], m["Body"]) for m in twilio.received] == [("+15550000002", "Hi ada")]


def test_a_recipient_without_a_phone_is_skipped_for_missing_channel_data(dispatched):
    person = RecipientFactory(phone=None)
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=TEXT_THE_RECIPIENT), recipient=person
    )
    assert run(instance) == StepOutcome.COMPLETED
    assert sms.outbox == []
    log = log_of(instance)
    assert (log.success, log.skip_reason) == (True, "missing_channel_data")
    instance.refresh_from_db()
    assert instance.vars["sms_text"] == {"skipped": True, "reason": "missing_channel_data"}


def test_an_sms_opt_out_skips_sms_with_its_rule(dispatched):
    person = RecipientFactory(phone="+15550000001", preferences={"channels": {"sms": False}})
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=TEXT_THE_RECIPIENT), recipient=person
    )
    assert run(instance) == StepOutcome.COMPLETED
    assert sms.outbox == []
    assert log_of(instance).output == {
        "skipped": True,
        "reason": "preference_opt_out",
        "rule": "channels.sms",
    }


def test_no_to_and_no_recipient_fails_clearly(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=TEXT_THE_RECIPIENT))
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "node text has no `to` and instance has no recipient" in instance.last_error


def test_an_invalid_stored_phone_fails_permanently_naming_the_field(dispatched):
    person = RecipientFactory(phone="12345")
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=TEXT_THE_RECIPIENT), recipient=person
    )
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert "recipient.phone" in instance.last_error
