"""An erasure racing a step mid-send, on real PostgreSQL: the step
read the person's addresses before the erasure, sends, and records after it - its step
log, delivery and provider attempts must not keep the addresses. Two orders: the
erasure commits while the provider call is in flight, and the step's outcome statement
arrives while the erasure's transaction is still open (it waits on the erasure's locks,
then finds the instance cancelled)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core import serializers
from django.db import connection, connections

from executions import engine
from executions.erasure import recipient_erase
from executions.models import Delivery, DeliveryAttempt, StepExecutionLog
from tests.factories import (
    PushDeviceFactory,
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
)
from tests.worker import wait_until
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

EMAIL, PHONE = "carol.pii@example.com", "+15557654321"
TO_THE_RECIPIENT = {
    "entry_node_id": "hello",
    "nodes": [
        {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
        {"id": "text", "type": "sms", "config": {"body": "Hi"}},
    ],
    "edges": [{"from": "hello", "to": "text"}],
}
LIMIT_S = 60


class InThread(threading.Thread):
    """``target`` in a thread with a database connection of its own."""

    def __init__(self, target: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.target_call, self.result, self.error = target, None, None

    def run(self) -> None:
        try:
            self.result = self.target_call()
        except BaseException as exc:  # re-raised by finish()
            self.error = exc
        finally:
            connections.close_all()

    def finish(self) -> Any:
        self.join(LIMIT_S)
        assert not self.is_alive(), "thread still running"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def instance(dispatched):
    carol = RecipientFactory(id="carol", email=EMAIL, phone=PHONE)
    return TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=TO_THE_RECIPIENT),
        recipient=carol,
        idempotency_key=f"welcome-{EMAIL}",
        payload={"email": EMAIL},
    )


@pytest.fixture
def paused_send(monkeypatch):
    """The email provider call waits: ``sending`` is set once it is in flight (the
    delivery row begun), and it goes on when ``release`` is set."""
    sending, release = threading.Event(), threading.Event()
    from executions.nodes import email as email_node

    real = email_node.send_email

    def send_email(**kwargs: Any) -> Any:
        sending.set()
        assert release.wait(LIMIT_S), "never released"
        return real(**kwargs)

    monkeypatch.setattr(email_node, "send_email", send_email)
    return sending, release


def _left_behind(instance_id: Any, *secrets: str) -> list[str]:
    """The rows of the instance's step logs, deliveries and attempts holding an address
    (or one of ``secrets``)."""
    found = []
    for model, lookup in (
        (StepExecutionLog, "trigger_id"),
        (Delivery, "instance_id"),
        (DeliveryAttempt, "delivery__instance_id"),
    ):
        for row in model.objects.filter(**{lookup: instance_id}):
            text = serializers.serialize("json", [row]).lower()
            if any(held.lower() in text for held in (EMAIL, PHONE, *secrets)):
                found.append(text)
    return found


def _assert_scrubbed_after_the_race(instance_id: Any) -> None:
    instance = TriggerInstance.objects.get(pk=instance_id)
    assert (instance.status, instance.recipient_erased) == (TriggerStatus.CANCELLED, True)
    log = StepExecutionLog.objects.get(trigger_id=instance_id, node_id="hello")
    # Not advanced. (Whose statement waited for the erasure's commit saw the instance
    # still processing in its snapshot: "lease_lost".)
    assert log.error_kind in ("cancelled", "lease_lost")
    delivery = Delivery.objects.get(instance_id=instance_id, node_id="hello")
    assert delivery.status == "sent"  # the message did go: its record is kept, scrubbed
    assert _left_behind(instance_id) == []


def test_an_erasure_committed_while_the_provider_call_is_in_flight(instance, paused_send):
    sending, release = paused_send
    step = InThread(lambda: engine.step_execute(instance_id=instance.pk))
    step.start()
    assert sending.wait(LIMIT_S), "the step never reached its send"
    recipient_erase(recipient_id="carol", actor="test")
    release.set()
    step.finish()
    _assert_scrubbed_after_the_race(instance.pk)


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_step_recording_while_the_erasure_is_still_open(instance, paused_send, monkeypatch):
    sending, release = paused_send
    scrubbed, commit = threading.Event(), threading.Event()
    from executions import erasure

    real_feed_erase = erasure.feed_erase

    def feed_erase(**kwargs: Any) -> Any:
        # The erasure has cancelled and scrubbed, holding its locks: hold them longer.
        scrubbed.set()
        assert commit.wait(LIMIT_S), "never let commit"
        return real_feed_erase(**kwargs)

    monkeypatch.setattr(erasure, "feed_erase", feed_erase)
    step = InThread(lambda: engine.step_execute(instance_id=instance.pk))
    step.start()
    assert sending.wait(LIMIT_S), "the step never reached its send"
    eraser = InThread(lambda: recipient_erase(recipient_id="carol", actor="test"))
    eraser.start()
    assert scrubbed.wait(LIMIT_S), "the erasure never scrubbed"
    release.set()
    # The step's outcome statement waits for the erasure's row locks.
    wait_until(_waiting_on_a_lock, timeout=LIMIT_S, what="the step's outcome to wait")
    commit.set()
    eraser.finish()
    step.finish()
    _assert_scrubbed_after_the_race(instance.pk)


def test_a_push_fenced_by_an_erasure_keeps_no_token(fake_fcm, dispatched, monkeypatch):
    """The device's row is gone with the person when the step records: what it wrote -
    here FCM's error quoting the token - is scrubbed with the token the step had read."""
    token = "fcm-token-of-carol:APA91bPrivate"
    carol = RecipientFactory(id="carol")
    PushDeviceFactory(recipient=carol, token=token)
    push = {"id": "hello", "type": "push", "config": {"title": "Hi", "body": "Hello"}}
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition={"entry_node_id": "hello", "nodes": [push]}),
        recipient=carol,
    )
    fake_fcm.script.append("INVALID_TOKEN_VALUE")
    sending, release = threading.Event(), threading.Event()
    from executions.nodes import push as push_node

    real = push_node.send_push

    def send_push(**kwargs: Any) -> Any:
        sending.set()
        assert release.wait(LIMIT_S), "never released"
        return real(**kwargs)

    monkeypatch.setattr(push_node, "send_push", send_push)
    step = InThread(lambda: engine.step_execute(instance_id=instance.pk))
    step.start()
    assert sending.wait(LIMIT_S), "the step never reached its send"
    recipient_erase(recipient_id="carol", actor="test")
    release.set()
    step.finish()
    assert [token in str(sent) for sent, _ in fake_fcm.received] == [True]
    delivery = Delivery.objects.get(instance_id=instance.pk, node_id="hello")
    assert delivery.targets  # the device's result is kept ...
    assert _left_behind(instance.pk, token) == []  # ... without the token
