"""Provider failover: two local SMTP servers and two fake Twilio servers
driven by the real smtplib / twilio clients; every provider call is a DeliveryAttempt
row; the delivery guard still forbids a second send after a recorded success."""

from __future__ import annotations

import pytest
from django.utils import timezone

from executions import engine
from executions.models import Delivery, DeliveryAttempt, DeliveryStatus
from executions.outcomes import StepOutcome
from executions.providers.base import ProviderError
from executions.providers.failover import send_with_failover
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fake_smtp import FakeSmtpServer
from tests.fake_twilio import FakeTwilio
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

EMAIL_ONLY = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {"to": "{{ payload.email }}", "subject": "Hi", "body": "Hello"},
        }
    ],
    "edges": [],
}
SMS_ONLY = {
    "entry_node_id": "text",
    "nodes": [{"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "Hi"}}],
    "edges": [],
}


@pytest.fixture
def smtp_pair(settings):
    servers = []

    def make(first_mode: str) -> tuple[FakeSmtpServer, FakeSmtpServer]:
        first, second = FakeSmtpServer(first_mode), FakeSmtpServer("accept")
        servers.extend([first, second])
        settings.NOTIFYFLOW_EMAIL_BACKENDS = [first.provider("primary"), second.provider("backup")]
        return first, second

    yield make
    for server in servers:
        server.close()


def attempts_of(instance) -> list[tuple[int, str, str]]:
    return list(
        DeliveryAttempt.objects.filter(delivery__instance=instance)
        .order_by("id")
        .values_list("attempt", "provider", "outcome")
    )


@pytest.mark.parametrize("first_mode", ["451", "close"])
def test_transient_smtp_failure_fails_over_to_the_next_server(smtp_pair, dispatched, first_mode):
    first, second = smtp_pair(first_mode)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert first.connections == 1 and len(second.messages) == 1
    assert attempts_of(instance) == [(1, "primary", "transient"), (1, "backup", "sent")]
    failed, sent = DeliveryAttempt.objects.filter(delivery__instance=instance).order_by("id")
    assert failed.error and failed.latency_ms >= 0 and not failed.message_id
    assert sent.message_id == f"<{instance.pk}.hello@notifyflow>"
    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 1)


def test_permanent_rejection_does_not_fail_over(smtp_pair, dispatched):
    first, second = smtp_pair("550")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    assert second.connections == 0
    assert attempts_of(instance) == [(1, "primary", "permanent")]
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.FAILED


def test_every_provider_down_is_one_transient_attempt_retried_later(settings, dispatched):
    first, second = FakeSmtpServer("451"), FakeSmtpServer("close")
    try:
        settings.NOTIFYFLOW_EMAIL_BACKENDS = [first.provider("a"), second.provider("b")]
        instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
        instance.refresh_from_db()
        assert (instance.status, instance.attempts) == (TriggerStatus.ENQUEUED, 1)
        assert "all 2 email providers failed" in instance.last_error
        # The retry: the first provider is back.
        first.mode = "accept"
        TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
        assert attempts_of(instance) == [
            (1, "a", "transient"),
            (1, "b", "transient"),
            (2, "a", "sent"),
        ]
    finally:
        first.close()
        second.close()


def test_guard_forbids_a_second_send_after_a_recorded_success(smtp_pair, dispatched):
    first, second = smtp_pair("451")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    # Replay the same node as a redelivered message would: nothing is sent again.
    TriggerInstance.objects.filter(pk=instance.pk).update(
        status=TriggerStatus.ENQUEUED, current_node_id="hello", available_at=timezone.now()
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert len(second.messages) == 1 and first.connections == 1
    assert len(attempts_of(instance)) == 2
    assert TriggerInstance.objects.get(pk=instance.pk).vars["email_hello"]["deduplicated"]


@pytest.fixture
def twilio_pair(settings):
    with FakeTwilio() as first, FakeTwilio() as second:
        settings.NOTIFYFLOW_SMS_BACKENDS = [
            {
                "name": f"twilio-{label}",
                "backend": "twilio",
                "options": {
                    "account_sid": "AC" + "0" * 32,
                    "auth_token": "secret",
                    "from_number": "+15550001111",
                    "api_base_url": fake.url,
                },
            }
            for label, fake in (("a", first), ("b", second))
        ]
        yield first, second


def test_twilio_5xx_fails_over_to_the_second_account(twilio_pair, dispatched):
    first, second = twilio_pair
    first.responses = [503]
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert len(first.received) == 1 and first.accepted == []
    assert len(second.accepted) == 1
    instance.refresh_from_db()
    assert instance.vars["sms_text"]["message_id"] == second.accepted[0]
    assert attempts_of(instance) == [(1, "twilio-a", "transient"), (1, "twilio-b", "sent")]
    assert Delivery.objects.get(instance=instance).provider_message_id == second.accepted[0]


def test_twilio_4xx_is_permanent_and_stops(twilio_pair, dispatched):
    first, second = twilio_pair
    first.responses = [400]
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    assert second.received == []
    assert attempts_of(instance) == [(1, "twilio-a", "permanent")]


def test_circuit_breaker_skips_a_failing_provider_for_a_while(settings):
    from executions.providers.failover import ProviderSpec, collect_attempts

    settings.NOTIFYFLOW_CIRCUIT_FAILURES = 2
    settings.NOTIFYFLOW_CIRCUIT_OPEN_S = 60
    calls: list[str] = []

    def call(provider: ProviderSpec) -> str:
        calls.append(provider.name)
        if provider.name == "flaky":
            raise ProviderError("503", permanent=False)
        return "ok"

    providers = [ProviderSpec("flaky", "x"), ProviderSpec("steady", "y")]
    with collect_attempts() as attempts:
        for _ in range(3):
            send_with_failover(channel="test", providers=providers, call=call, message_id=str)
    # Two failures open the circuit: the third send goes straight to "steady".
    assert calls == ["flaky", "steady", "flaky", "steady", "steady"]
    assert [a["outcome"] for a in attempts][-2:] == ["skipped", "sent"]


def test_attempts_are_shown_in_the_api_and_the_admin(smtp_pair, dispatched, api, client):
    from tests.admin_helpers import make_superuser

    smtp_pair("451")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
    engine.step_execute(instance_id=instance.pk)
    response = api.get(f"/api/v1/triggers/{instance.pk}/deliveries/")
    assert response.status_code == 200
    [delivery] = response.json()["results"]
    assert (delivery["node_id"], delivery["channel"], delivery["status"]) == (
        "hello",
        "email",
        "sent",
    )
    assert [(a["provider"], a["outcome"]) for a in delivery["provider_attempts"]] == [
        ("primary", "transient"),
        ("backup", "sent"),
    ]
    client.force_login(make_superuser())
    page = client.get(f"/admin/executions/delivery/{delivery['id']}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "provider attempts" in html.lower() and "primary" in html and "backup" in html
