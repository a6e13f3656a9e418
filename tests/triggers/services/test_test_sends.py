"""Test sends (``workflow_test_send``): one real instance for an existing recipient,
marked test under a fresh ``test:`` key, through the normal trigger service, left out
of the trigger counters. Runs on both databases (the trigger insert differs)."""

from __future__ import annotations

import pytest

from notifyflow import metrics
from notifyflow.errors import ApplicationError, NotFoundError
from recipients.models import Recipient
from tests.factories import PAYLOAD, RecipientFactory, WorkflowFactory
from triggers.models import TriggerInstance
from triggers.services import RecipientEntry, trigger_create_for_recipients, workflow_test_send

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def created_count() -> float:
    return (
        metrics.REGISTRY.get_sample_value("notifyflow_triggers_total", {"outcome": "created"}) or 0
    )


def test_test_send_starts_one_instance_marked_test(dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada")
    before = created_count()

    first = workflow_test_send(workflow=workflow, recipient_id="ada", payload=PAYLOAD, actor="root")
    second = workflow_test_send(workflow=workflow.key, recipient_id="ada", payload={}, actor="root")

    assert first.is_test and second.is_test
    assert first.recipient_id == "ada" and first.payload == PAYLOAD
    assert first.idempotency_key.startswith("test:")
    assert first.idempotency_key != second.idempotency_key
    assert {instance_id for instance_id, _ in dispatched} == {str(first.pk), str(second.pk)}
    assert created_count() == before


def test_test_send_to_an_unknown_recipient_creates_nobody_and_nothing():
    workflow = WorkflowFactory()
    with pytest.raises(NotFoundError) as error:
        workflow_test_send(workflow=workflow, recipient_id="ghost", payload={}, actor="root")
    assert error.value.field == "recipient_id"
    assert not Recipient.objects.exists() and not TriggerInstance.objects.exists()


def test_test_send_of_an_inactive_workflow_is_refused():
    workflow = WorkflowFactory(is_active=False)
    RecipientFactory(id="ada")
    with pytest.raises(ApplicationError):
        workflow_test_send(workflow=workflow, recipient_id="ada", payload={}, actor="root")
    assert not TriggerInstance.objects.exists()


def test_an_ordinary_trigger_is_not_a_test(dispatched):
    WorkflowFactory(key="welcome")
    before = created_count()
    result = trigger_create_for_recipients(
        workflow="welcome", idempotency_key="k", payload=PAYLOAD, recipients=[RecipientEntry("bo")]
    )
    assert not TriggerInstance.objects.get(pk=result.instances[0].id).is_test
    assert created_count() == before + 1


def test_test_send_renders_in_the_locale_it_names(dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada", locale="en")

    named = workflow_test_send(
        workflow=workflow, recipient_id="ada", payload={}, actor="root", locale="pt-BR"
    )
    plain = workflow_test_send(workflow=workflow, recipient_id="ada", payload={}, actor="root")

    assert TriggerInstance.objects.get(pk=named.pk).locale == "pt-BR"
    assert named.locale == "pt-BR" and plain.locale is None
    assert {instance_id for instance_id, _ in dispatched} == {str(named.pk), str(plain.pk)}


def test_test_send_refuses_an_unknown_locale_and_creates_nothing():
    workflow = WorkflowFactory()
    RecipientFactory(id="ada")
    with pytest.raises(ApplicationError) as error:
        workflow_test_send(
            workflow=workflow, recipient_id="ada", payload={}, actor="root", locale="klingon"
        )
    assert (error.value.code, error.value.field) == ("invalid_locale", "locale")
    assert not TriggerInstance.objects.exists()
