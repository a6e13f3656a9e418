"""A step whose outcome write meets a database outage keeps retrying it for as long as
its lease (and its soft time limit) holds, so a message sent before the outage is
recorded once, not sent again when the lease expires (issue: 12 s sent emails twice)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import OperationalError

from executions import engine
from executions.models import Delivery, DeliveryStatus, StepExecutionLog
from executions.outcomes import StepOutcome
from executions.providers import sms
from executions.recording import postgres as recording_postgres
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ONE_SMS = {
    "entry_node_id": "text",
    "edges": [],
    "nodes": [{"id": "text", "type": "sms", "config": {"to": "+15005550006", "body": "hi"}}],
}


class FakeClock:
    """``time`` of the PostgreSQL recorder: sleeping moves the clock on at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def outage(monkeypatch):
    """``outage(seconds)``: every outcome write fails as a lost connection would until
    the (fake) clock has moved on that far from the first failure."""
    clock = FakeClock()
    monkeypatch.setattr(recording_postgres, "time", clock)
    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", lambda *a, **k: None)
    real = recording_postgres.record_reconnecting
    writes: list[float] = []

    def start(seconds: float) -> list[float]:
        def reconnecting(record, instance_id, **kwargs):
            ends = clock.now + seconds

            def record_after_the_outage(replay: bool) -> bool:
                writes.append(clock.now)
                if clock.now < ends:
                    raise OperationalError("connection refused (the server is stopped)")
                return record(replay)

            return real(record_after_the_outage, instance_id, **kwargs)

        monkeypatch.setattr(recording_postgres, "record_reconnecting", reconnecting)
        return writes

    return start


def test_outcome_write_survives_a_12_s_outage_and_the_message_is_sent_once(outage):
    writes = outage(12)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED

    assert writes[-1] - writes[0] >= 12
    assert len(sms.outbox) == 1
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED and instance.locked_until is None
    assert StepExecutionLog.objects.filter(trigger=instance, success=True).count() == 1
    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 1)


def test_outcome_write_gives_up_before_the_soft_time_limit_or_the_lease(settings, outage):
    settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S = 30
    settings.NOTIFYFLOW_LEASE_S = 90
    writes = outage(600)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    with pytest.raises(OperationalError):
        engine.step_execute(instance_id=instance.pk)

    assert 20 <= writes[-1] - writes[0] < 30  # within the soft limit, less the margin
    # Left to the lease: still claimed; the sweeper recovers it and the send is retried.
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.PROCESSING


def test_outcome_write_retries_no_longer_than_a_short_lease(settings, outage):
    settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S = 30
    settings.NOTIFYFLOW_STEP_TIME_LIMIT_S = 40
    settings.NOTIFYFLOW_LEASE_S = 10
    writes = outage(600)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    with pytest.raises(OperationalError):
        engine.step_execute(instance_id=instance.pk)

    assert 5 <= writes[-1] - writes[0] < 10


def test_outcome_write_is_retried_for_a_few_seconds_even_with_a_short_soft_limit(settings, outage):
    """A terminated backend or a quick restart is always waited out (0, 0.5, 1, 2 s),
    as before, even when the time limits leave less."""
    settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S = 3
    settings.NOTIFYFLOW_STEP_TIME_LIMIT_S = 4
    settings.NOTIFYFLOW_LEASE_S = 5
    writes = outage(3)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert writes[-1] - writes[0] >= 3 and len(sms.outbox) == 1


class SentMeanwhileUncommittedSmsBackend(sms.LocmemSmsBackend):
    """Sends; meanwhile another live attempt of the step (a worker frozen past its lease)
    records the message sent in a transaction it commits only once this step's outcome
    statement is waiting on it."""

    other: threading.Thread | None = None

    def send(self, message: sms.SmsMessage) -> sms.SmsSendResult:
        from django.db import connection

        instance = TriggerInstance.objects.get(status=TriggerStatus.PROCESSING)
        settings = connection.settings_dict
        other = psycopg.connect(
            host=settings["HOST"] or "127.0.0.1",
            port=settings["PORT"] or 5432,
            user=settings["USER"] or "postgres",
            dbname=settings["NAME"],
        )
        other.execute(
            "INSERT INTO executions_delivery (instance_id, node_id, channel, recipient, status,"
            " provider_message_id, output, attempts, created_at, updated_at)"
            " VALUES (%s, 'text', 'sms', '', 'sent', 'first', '{}', 1, now(), now())",
            [instance.pk],
        )

        def commit_once_waited_on() -> None:
            time.sleep(1.0)
            other.commit()
            other.close()

        type(self).other = threading.Thread(target=commit_once_waited_on)
        type(self).other.start()
        return super().send(message)


def test_an_outcome_waiting_on_another_attempts_sent_record_keeps_that_record(settings):
    settings.SMS_BACKEND = (
        "tests.executions.recording.test_postgres.SentMeanwhileUncommittedSmsBackend"
    )
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(definition=ONE_SMS))

    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED

    SentMeanwhileUncommittedSmsBackend.other.join()
    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.provider_message_id) == (DeliveryStatus.SENT, "first")
    assert TriggerInstance.objects.get(pk=instance.pk).status == TriggerStatus.COMPLETED
