"""Send windows and quiet hours on the email and SMS nodes: outside them the
instance parks until the send is allowed (the timeline says ``send_window``), run-now
overrides, ``expires_after`` skips with ``expired``, critical workflows ignore quiet
hours but not their own window. The clock is moved by patching ``timezone.now``."""

from __future__ import annotations

import email
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from executions.selectors import instance_timeline
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from tests.fake_smtp import FakeSmtpServer
from triggers import state
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus
from workflows.models import Workflow

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
S = TriggerStatus
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


def definition(node_type: str = "email", **config) -> dict:
    send = (
        {"subject": "Your code", "body": "1234"} if node_type == "email" else {"body": "Code 1234"}
    )
    return {
        "entry_node_id": "code",
        "nodes": [
            {"id": "code", "type": node_type, "config": {**send, **config}},
            {"id": "after", "type": "delay", "config": {"delay_ms": 0}},
        ],
        "edges": [{"from": "code", "to": "after"}],
    }


def window_opening_in(hours: float, *, length_h: float = 3) -> tuple[dict, datetime]:
    """A UTC send window (every day) that opens ``hours`` from now, and that opening."""
    opens = (timezone.now() + timedelta(hours=hours)).replace(second=0, microsecond=0)
    until = opens + timedelta(hours=length_h)
    window = {"days": EVERY_DAY, "from": hhmm(opens), "until": hhmm(until), "timezone": "UTC"}
    return window, opens


@pytest.fixture
def smtp(settings):
    server = FakeSmtpServer("accept")
    settings.NOTIFYFLOW_EMAIL_BACKENDS = [server.provider("smtp")]
    yield server
    server.close()


@pytest.fixture
def clock(monkeypatch):
    """``clock(at)`` makes ``timezone.now()`` answer ``at`` from then on."""

    def move(at: datetime) -> None:
        monkeypatch.setattr(timezone, "now", lambda: at)

    return move


def recipient_instance(flow: Workflow, **person) -> TriggerInstance:
    return TriggerInstanceFactory(workflow=flow, recipient=RecipientFactory(**person), payload={})


def run(instance: TriggerInstance) -> StepOutcome:
    return engine.step_execute(instance_id=instance.pk)


def test_an_email_outside_its_send_window_parks_until_the_window_opens(smtp, dispatched):
    window, opens = window_opening_in(2)
    flow = WorkflowFactory(definition=definition(send_window=window))
    instance = recipient_instance(flow)
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    assert (instance.status, instance.parked_on) == (S.ENQUEUED, ParkedOn.SEND_WINDOW)
    assert instance.available_at == opens == instance.wait_deadline
    log = StepExecutionLog.objects.get(trigger_id=instance.pk)
    assert log.parked and log.output["reason"].startswith("outside send window")
    assert smtp.messages == []
    pending = instance_timeline(instance_id=instance.pk).pending
    assert pending.waiting_for == {"kind": "send_window", "event": None, "deadline": opens}


def test_a_deferred_email_is_sent_when_its_window_opens(smtp, dispatched, clock):
    window, opens = window_opening_in(2)
    instance = recipient_instance(WorkflowFactory(definition=definition(send_window=window)))
    run(instance)
    clock(opens + timedelta(seconds=1))
    assert run(instance) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert (instance.current_node_id, instance.parked_on) == ("after", "")
    assert len(smtp.messages) == 1


def test_quiet_hours_defer_an_sms_in_the_recipients_timezone(dispatched, settings):
    tokyo = ZoneInfo("Asia/Tokyo")
    local = timezone.now().astimezone(tokyo)
    quiet = {"from": hhmm(local - timedelta(hours=1)), "until": hhmm(local + timedelta(hours=1))}
    flow = WorkflowFactory(definition=definition("sms"))
    instance = recipient_instance(flow, timezone="Asia/Tokyo", preferences={"quiet_hours": quiet})
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    ends = (local + timedelta(hours=1)).replace(second=0, microsecond=0)
    assert instance.available_at == ends.astimezone(UTC)
    reason = StepExecutionLog.objects.get(trigger_id=instance.pk).output["reason"]
    assert reason == f"quiet hours {quiet['from']}-{quiet['until']} Asia/Tokyo"


def test_a_critical_workflow_ignores_quiet_hours_but_not_its_send_window(smtp, dispatched):
    now = timezone.now()
    quiet = {"from": hhmm(now - timedelta(hours=1)), "until": hhmm(now + timedelta(hours=1))}
    flow = WorkflowFactory(definition=definition())
    Workflow.objects.filter(pk=flow.pk).update(critical=True)
    person = {"timezone": "UTC", "preferences": {"quiet_hours": quiet}}
    assert run(recipient_instance(flow, **person)) == StepOutcome.ADVANCED
    assert len(smtp.messages) == 1

    window, opens = window_opening_in(2)
    windowed = WorkflowFactory(definition=definition(send_window=window))
    Workflow.objects.filter(pk=windowed.pk).update(critical=True)
    instance = recipient_instance(windowed, **person)
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    assert instance.available_at == opens


def test_a_send_that_would_open_past_expires_after_is_skipped_as_expired(smtp, dispatched):
    window, _ = window_opening_in(2)
    flow = WorkflowFactory(definition=definition(send_window=window, expires_after="30m"))
    instance = recipient_instance(flow)
    assert run(instance) == StepOutcome.ADVANCED  # skipped is an outcome: it goes on
    instance.refresh_from_db()
    assert instance.current_node_id == "after"
    assert instance.vars["email_code"]["skipped"] is True
    assert instance.vars["email_code"]["reason"] == "expired"
    log = StepExecutionLog.objects.get(trigger_id=instance.pk)
    assert (log.success, log.skip_reason) == (True, "expired")
    assert smtp.messages == []


def test_a_deferred_send_that_wakes_past_its_expiry_is_skipped(smtp, dispatched, clock):
    window, opens = window_opening_in(2)
    flow = WorkflowFactory(definition=definition(send_window=window, expires_after="2h30m"))
    instance = recipient_instance(flow)
    assert run(instance) == StepOutcome.WAITING  # opens within 2h30m: deferred
    clock(opens + timedelta(hours=1))  # woken late (a worker outage): past the expiry
    assert run(instance) == StepOutcome.ADVANCED
    assert StepExecutionLog.objects.filter(trigger_id=instance.pk).latest("id").skip_reason == (
        "expired"
    )
    assert smtp.messages == []


def test_run_now_sends_a_deferred_email_outside_its_window(smtp, dispatched):
    window, _ = window_opening_in(2)
    instance = recipient_instance(WorkflowFactory(definition=definition(send_window=window)))
    run(instance)
    assert state.run_now(instance_id=instance.pk, actor="admin:ops")
    assert run(instance) == StepOutcome.ADVANCED
    (raw,) = smtp.messages
    assert email.message_from_bytes(raw)["Subject"] == "Your code"


def test_an_email_inside_its_window_and_outside_quiet_hours_is_sent_at_once(smtp, dispatched):
    now = timezone.now()
    window = {
        "days": EVERY_DAY,
        "from": hhmm(now - timedelta(hours=1)),
        "until": hhmm(now + timedelta(hours=2)),
        "timezone": "recipient",
    }
    quiet = {"from": hhmm(now + timedelta(hours=3)), "until": hhmm(now + timedelta(hours=4))}
    flow = WorkflowFactory(definition=definition(send_window=window))
    person = {"timezone": "UTC", "preferences": {"quiet_hours": quiet}}
    assert run(recipient_instance(flow, **person)) == StepOutcome.ADVANCED
    assert len(smtp.messages) == 1


def test_a_window_opening_in_the_spring_forward_gap_sends_at_the_next_valid_minute(
    dispatched, clock
):
    # New York skips 02:00-03:00 on 2026-03-08: a window from 02:30 opens at 03:00 EDT.
    new_york = ZoneInfo("America/New_York")
    window = {"days": EVERY_DAY, "from": "02:30", "until": "04:00", "timezone": "recipient"}
    flow = WorkflowFactory(definition=definition("sms", send_window=window))
    instance = recipient_instance(flow, timezone="America/New_York")
    reached = datetime(2026, 3, 7, 23, 0, tzinfo=new_york)
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=reached)
    clock(reached)
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    opens = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    assert instance.available_at == opens
    assert opens.astimezone(new_york).strftime("%H:%M %Z") == "03:00 EDT"
    clock(opens)
    assert run(instance) == StepOutcome.ADVANCED
    log = StepExecutionLog.objects.filter(trigger_id=instance.pk).latest("id")
    assert log.success and not log.skip_reason and log.output["to"] == instance.recipient.phone


def test_a_window_after_the_fall_back_opens_once_at_its_first_occurrence(dispatched, clock):
    # 01:30 happens twice in New York on 2026-11-01: the window opens at the first.
    window = {"days": ["sun"], "from": "01:30", "until": "05:00", "timezone": "America/New_York"}
    flow = WorkflowFactory(definition=definition("sms", send_window=window))
    instance = recipient_instance(flow, timezone="Europe/Paris")
    reached = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=reached)
    clock(reached)
    assert run(instance) == StepOutcome.WAITING
    instance.refresh_from_db()
    assert instance.available_at == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
