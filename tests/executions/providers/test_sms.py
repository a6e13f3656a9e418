"""The real twilio client against a local fake Twilio server: 201, 5xx, 4xx."""

from __future__ import annotations

import pytest

from executions import engine
from executions.outcomes import StepOutcome
from executions.providers.base import ProviderError
from executions.providers.sms import SmsMessage, TwilioSmsBackend
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fake_twilio import FakeTwilio
from triggers.models import TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

SMS_ONLY = {
    "entry_node_id": "text",
    "nodes": [
        {
            "id": "text",
            "type": "sms",
            "config": {"to": "{{ payload.phone }}", "body": "Hi {{ payload.name }}"},
        }
    ],
    "edges": [],
}


@pytest.fixture
def twilio(settings):
    with FakeTwilio() as fake:
        settings.SMS_BACKEND = "twilio"
        settings.TWILIO_ACCOUNT_SID = "AC" + "0" * 32
        settings.TWILIO_AUTH_TOKEN = "secret"
        settings.TWILIO_API_BASE_URL = fake.url
        settings.SMS_DEFAULT_FROM = "+15550001111"
        yield fake


def test_success_keeps_twilio_message_sid(twilio, dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    assert instance.vars["sms_text"]["message_id"] == twilio.accepted[0]
    assert twilio.received == [{"To": "+15005550006", "From": "+15550001111", "Body": "Hi Ada"}]


def test_server_error_is_retried_then_succeeds(twilio, dispatched):
    from django.utils import timezone

    from triggers.models import TriggerInstance

    twilio.responses = [500, 503]
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert (instance.status, instance.attempts) == (TriggerStatus.ENQUEUED, 1)
    assert "Twilio 500" in instance.last_error
    for expected in (StepOutcome.FAILED_TRANSIENT, StepOutcome.COMPLETED):
        TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
        assert engine.step_execute(instance_id=instance.pk) == expected
    instance.refresh_from_db()
    assert instance.vars["sms_text"]["message_id"] == twilio.accepted[0]
    assert len(twilio.received) == 3 and len(twilio.accepted) == 1


def test_client_error_is_permanent(twilio, dispatched):
    twilio.responses = [400]
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "Twilio 400" in instance.last_error and "21211" in instance.last_error
    assert len(twilio.received) == 1


def test_rate_limit_is_transient_and_unreachable_server_is_transient(twilio, settings):
    twilio.responses = [429]
    backend = TwilioSmsBackend()
    message = SmsMessage(to="+1", body="x", from_number="+2", idempotency_key="k")
    with pytest.raises(ProviderError) as limited:
        backend.send(message)
    assert not limited.value.permanent
    settings.TWILIO_API_BASE_URL = "http://127.0.0.1:1"
    with pytest.raises(ProviderError) as down:
        TwilioSmsBackend().send(message)
    assert not down.value.permanent and "connection" in str(down.value)
