"""Retries with exponential backoff, permanent errors, attempts reset, render errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from executions.selectors import instance_status_history
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fakes import ScriptedSmsBackend
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

SMS_THEN_EMAIL = {
    "entry_node_id": "text",
    "nodes": [
        {"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "hi"}},
        {
            "id": "mail",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "s",
                "body": "{{ vars.sms_text.to }}",
            },
        },
    ],
    "edges": [{"from": "text", "to": "mail"}],
}


@pytest.fixture
def scripted(settings):
    settings.SMS_BACKEND = "tests.fakes.ScriptedSmsBackend"
    settings.NOTIFYFLOW_RETRY_BASE_DELAY_S = 60
    settings.NOTIFYFLOW_MAX_RETRIES = 3
    return ScriptedSmsBackend


def make_due(instance: TriggerInstance) -> None:
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())


def test_transient_failures_back_off_exponentially_then_fail(scripted, dispatched):
    scripted.reset("transient", "transient", "transient", "transient")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_THEN_EMAIL))
    for attempt in (1, 2, 3):
        before = timezone.now()
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
        instance.refresh_from_db()
        assert instance.status == TriggerStatus.ENQUEUED
        assert instance.attempts == attempt
        expected = timedelta(seconds=60 * 2 ** (attempt - 1))
        assert before + expected <= instance.available_at <= timezone.now() + expected
        assert "provider 503" in instance.last_error
        assert dispatched[-1][1] == pytest.approx(expected.total_seconds(), abs=1)
        # Not due yet: a message now claims nothing.
        assert engine.step_execute(instance_id=instance.pk) in {"early", "skipped:enqueued"}
        make_due(instance)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and instance.attempts == 4
    assert instance.finished_at is not None
    assert scripted.calls == 4 and scripted.sent == []
    logs = StepExecutionLog.objects.filter(trigger=instance)
    assert [(log.attempt, log.success, log.error_kind) for log in logs] == [
        (n, False, "transient") for n in (1, 2, 3, 4)
    ]
    # Every change in the timeline: four claims (their step logs), three retries
    # scheduled and the failure (audit rows).
    trail = [(c.to_status, c.reason) for c in instance_status_history(instance=instance)]
    assert trail[-1][0] == "failed" and "retries exhausted" in trail[-1][1]
    assert [t for t, _ in trail] == ["processing", "enqueued"] * 3 + ["processing", "failed"]
    assert all("retry" in reason for t, reason in trail if t == "enqueued")


def test_permanent_error_fails_at_once(scripted, dispatched):
    scripted.reset("permanent")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_THEN_EMAIL))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert (instance.status, instance.attempts) == (TriggerStatus.FAILED, 1)
    assert "invalid 'To'" in instance.last_error
    assert dispatched == [] or all(i != str(instance.pk) for i, _ in dispatched[1:])


def test_render_error_is_permanent_and_names_the_field(scripted, dispatched):
    scripted.reset()
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=SMS_THEN_EMAIL), payload={"email": "a@b.c"}
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "to: template error" in instance.last_error and "phone" in instance.last_error
    assert scripted.calls == 0


def test_attempts_reset_when_the_cursor_advances(scripted, dispatched):
    from django.core import mail

    scripted.reset("transient")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_THEN_EMAIL))
    engine.step_execute(instance_id=instance.pk)
    make_due(instance)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert (instance.current_node_id, instance.attempts, instance.last_error) == ("mail", 0, "")
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED and instance.current_node_id is None
    assert mail.outbox[0].body == "+15005550006"  # vars from the earlier node
    assert instance.vars["sms_text"]["message_id"].startswith("scripted-")
    assert set(instance.vars["sms_text"]) >= {"message_id", "to", "sent_at"}
    assert set(instance.vars["email_mail"]) >= {"message_id", "to", "sent_at"}


def test_retry_after_success_recorded_does_not_send_again(scripted, dispatched):
    """A crash after the provider accepted and the delivery was recorded, but before the
    step's outcome committed: the recovered attempt must not send again."""
    from executions.models import Delivery, DeliveryStatus

    scripted.reset()
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_THEN_EMAIL))
    Delivery.objects.create(
        instance=instance,
        node_id="text",
        channel="sms",
        status=DeliveryStatus.SENT,
        provider_message_id="SM1",
        output={"message_id": "SM1", "to": "+1", "sent_at": "t"},
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert scripted.calls == 0
    instance.refresh_from_db()
    assert instance.vars["sms_text"]["message_id"] == "SM1"


def test_delay_until_in_the_past_continues_at_once_and_says_so(dispatched):
    definition = {
        "entry_node_id": "wait",
        "nodes": [
            {"id": "wait", "type": "delay", "config": {"until": "{{ payload.at }}"}},
            {"id": "text", "type": "sms", "config": {"to": "+1", "body": "x"}},
        ],
        "edges": [{"from": "wait", "to": "text"}],
    }
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=definition), payload={"at": "2001-01-01T00:00:00Z"}
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    log = StepExecutionLog.objects.get(trigger=instance)
    assert "past" in log.output["note"]
    instance.refresh_from_db()
    assert instance.available_at <= timezone.now()
    assert dispatched[-1] == (str(instance.pk), None)


def test_delay_sets_available_at_and_countdown(dispatched):
    definition = {
        "entry_node_id": "wait",
        "nodes": [
            {"id": "wait", "type": "delay", "config": {"duration": "PT2M"}},
            {"id": "text", "type": "sms", "config": {"to": "+1", "body": "x"}},
        ],
        "edges": [{"from": "wait", "to": "text"}],
    }
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=definition))
    before = timezone.now()
    engine.step_execute(instance_id=instance.pk)
    instance.refresh_from_db()
    assert before + timedelta(minutes=2) <= instance.available_at
    assert instance.available_at <= timezone.now() + timedelta(minutes=2)
    assert dispatched[-1][1] == pytest.approx(120, abs=1)


def test_step_log_records_input_context(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    engine.step_execute(instance_id=instance.pk, task_id="task-1", worker="w@h")
    log = StepExecutionLog.objects.get(trigger=instance)
    # The instance holds the payload once; the log refers to it.
    assert log.input_context["payload"] == {"$ref": "instance.payload"}
    assert log.input_context["trigger"]["id"] == str(instance.pk)
    assert log.input_context["workflow"]["version"] == 1
    assert (log.node_id, log.node_type, log.success, log.task_id) == (
        "hello",
        "email",
        True,
        "task-1",
    )
    with pytest.raises(ValueError):
        log.save()


@pytest.mark.parametrize("priority", ["critical", "bulk"])
def test_next_steps_retries_and_early_messages_stay_in_the_instances_lane(
    scripted, dispatched, priority
):
    """The engine's every re-send (next node, retry with backoff, an early message sent
    again) goes to the instance's own lane's queue."""
    queue = {"critical": "notifyflow.critical", "bulk": "notifyflow.bulk"}[priority]
    scripted.reset("ok", "transient")
    definition = {
        "entry_node_id": "first",
        "nodes": [
            {"id": "first", "type": "sms", "config": {"to": "+15005550006", "body": "a"}},
            {"id": "second", "type": "sms", "config": {"to": "+15005550006", "body": "b"}},
        ],
        "edges": [{"from": "first", "to": "second"}],
    }
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=definition, priority=priority)
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.EARLY
    assert [countdown is not None for _, countdown in dispatched] == [False, True, True]
    assert dispatched.routes == [(str(instance.pk), queue)] * 3
