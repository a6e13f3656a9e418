"""A step's status events, written with its outcome (on PostgreSQL in its one
statement): ``delivery.sent`` with the delivery's 'sent' record, ``step.skipped`` for a
node that chose not to send, and ``instance.<status>`` when the instance ends - in that
sequence order, never with an address or a message's content."""

from __future__ import annotations

import json

import pytest
from django.core import mail
from django.utils import timezone

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import (
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
    render_error_definition,
)
from tests.fakes import email_node_stalling_past_its_lease
from tests.webhook_events import kicks, sent_to, subscribe, types_in_order
from triggers.models import TriggerInstance, TriggerStatus
from workflows.definition import node_types

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.django_db,
    pytest.mark.usefixtures("kicks", "dispatched"),
]
__all__ = ["kicks"]

ALL = ("delivery.*", "step.skipped", "instance.completed", "instance.failed")


def email_then_sms() -> dict:
    """An email and an SMS to the instance's recipient (addresses from the recipient)."""
    return {
        "entry_node_id": "hello",
        "nodes": [
            {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
            {"id": "text", "type": "sms", "config": {"body": "Hi"}},
        ],
        "edges": [{"from": "hello", "to": "text"}],
    }


def run_to_the_end(instance: TriggerInstance) -> None:
    for _ in range(5):
        engine.step_execute(instance_id=instance.pk)
        instance.refresh_from_db()
        if instance.is_terminal:
            return
        TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    raise AssertionError(f"instance still {instance.status}")


def test_a_send_a_skip_and_the_end_are_reported_in_sequence_order():
    endpoint = subscribe(*ALL)
    person = RecipientFactory(id="ada", email="ada@example.com", phone=None)
    flow = WorkflowFactory(definition=email_then_sms())
    instance = TriggerInstanceFactory(workflow=flow, recipient=person, payload={})
    run_to_the_end(instance)
    assert types_in_order(endpoint, instance.pk) == [
        (1, "delivery.sent"),
        (2, "step.skipped"),
        (3, "instance.completed"),
    ]
    sent, skipped, completed = sent_to(endpoint, instance_id=instance.pk)
    assert sent.data == {
        "instance_id": str(instance.pk),
        "sequence": 1,
        "node_id": "hello",
        "channel": "email",
        "provider": sent.data["provider"],
        "message_id": f"<{instance.pk}.hello@notifyflow>",
        "status": "sent",
    }
    assert sent.data["provider"]
    assert skipped.data == {
        "instance_id": str(instance.pk),
        "sequence": 2,
        "node_id": "text",
        "node_type": "sms",
        "reason": "missing_channel_data",
    }
    assert completed.data["recipient"] == "ada" and completed.data["status"] == "completed"
    # Never an address or a message's content.
    for message in (sent, skipped, completed):
        assert "@example.com" not in json.dumps(message.data)
        assert "Hello" not in json.dumps(message.data)


def test_an_opt_out_skip_names_the_rule_that_decided():
    endpoint = subscribe("step.skipped")
    person = RecipientFactory(preferences={"channels": {"email": False}})
    flow = WorkflowFactory(definition=email_then_sms())
    instance = TriggerInstanceFactory(workflow=flow, recipient=person, payload={})
    engine.step_execute(instance_id=instance.pk)
    (skipped,) = sent_to(endpoint)
    assert (skipped.sequence, skipped.data["reason"], skipped.data["rule"]) == (
        1,
        "preference_opt_out",
        "channels.email",
    )


def test_an_endpoint_of_the_delivery_family_gets_only_delivery_events():
    family = subscribe("delivery.*")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())  # email, then SMS
    run_to_the_end(instance)
    assert [m.type for m in sent_to(family)] == ["delivery.sent", "delivery.sent"]
    assert [m.data["channel"] for m in sent_to(family)] == ["email", "sms"]
    assert [m.sequence for m in sent_to(family)] == [1, 2]


def test_a_step_that_fails_for_good_reports_the_failure_without_the_error_text():
    endpoint = subscribe(*ALL)
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=render_error_definition())
    )
    run_to_the_end(instance)
    assert instance.status == TriggerStatus.FAILED
    assert types_in_order(endpoint, instance.pk) == [(1, "delivery.sent"), (2, "instance.failed")]
    failed = sent_to(endpoint, type="instance.failed")[0]
    assert failed.data["reason"] == "permanent error at node text (permanent)"
    assert "nmae" not in json.dumps(failed.data)


def test_a_fenced_out_step_reports_its_send_but_not_its_outcome(monkeypatch):
    """A worker that stalls past its lease: its send is recorded and reported once, its
    advance is discarded and reports nothing; the next attempt sends and reports no
    second ``delivery.sent``."""
    endpoint = subscribe(*ALL)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    real_email = node_types.get("email").run
    email_node_stalling_past_its_lease(monkeypatch, instance)
    assert engine.step_execute(instance_id=instance.pk, worker="zombie") == StepOutcome.ADVANCED
    assert types_in_order(endpoint, instance.pk) == [(1, "delivery.sent")]
    monkeypatch.setattr(node_types.get("email"), "run", real_email)
    run_to_the_end(instance)
    assert len(mail.outbox) == 1
    assert types_in_order(endpoint, instance.pk) == [
        (1, "delivery.sent"),
        (2, "delivery.sent"),
        (3, "instance.completed"),
    ]
    assert [m.data["node_id"] for m in sent_to(endpoint, type="delivery.sent")] == [
        "hello",
        "text",
    ]


def test_a_step_of_an_instance_cancelled_meanwhile_reports_its_send_and_the_cancel(monkeypatch):
    endpoint = subscribe(*ALL, "instance.cancelled")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    real_email = node_types.get("email").run

    def cancelled_while_sending(step):
        from triggers import state

        assert state.cancel(
            instance_id=instance.pk, from_status=TriggerStatus.PROCESSING, reason="stop", actor="t"
        )
        return real_email(step)

    monkeypatch.setattr(node_types.get("email"), "run", cancelled_while_sending)
    engine.step_execute(instance_id=instance.pk)
    assert types_in_order(endpoint, instance.pk) == [
        (1, "instance.cancelled"),
        (2, "delivery.sent"),
    ]
