"""Erasure (DELETE /recipients/{id}/): in one transaction the person's
unfinished instances are cancelled, their addresses leave every history row
(deliveries, attempts, provider events, step logs, status changes, inbox, the
instances' payload), the recipient, preferences, memberships and opt-outs go - and
nobody else's rows change. The history tables' UPDATE guard (PostgreSQL) lets erasure
through and nothing else."""

from __future__ import annotations

import pytest
from django.core import serializers
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from executions import engine
from executions.erasure import ERASED, recipient_erase
from executions.models import Delivery, DeliveryAttempt, DeliveryEvent, StepExecutionLog
from notifyflow.errors import NotFoundError
from recipients.models import ListMembership, OptOut, Recipient
from recipients.preferences import opt_out
from tests.factories import (
    RecipientFactory,
    RecipientListFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
)
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import InboxEvent

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

HISTORY = [
    TriggerInstance,
    StepExecutionLog,
    TriggerStatusChange,
    Delivery,
    DeliveryAttempt,
    DeliveryEvent,
    InboxEvent,
]


def _run_to_the_end(instance: TriggerInstance) -> None:
    for _ in range(3):
        instance.refresh_from_db()
        if instance.is_terminal:
            return
        engine.step_execute(instance_id=instance.pk)


def _person(workflow, recipient: Recipient) -> tuple[TriggerInstance, TriggerInstance]:
    """A finished instance (an email and an SMS sent to the person, a provider event, an
    inbox event) and one still waiting, both of ``recipient``."""
    payload = {
        "name": "Ada",
        "email": recipient.email.upper(),
        "phone": recipient.phone,
        "user_id": recipient.pk,
    }
    done = TriggerInstanceFactory(workflow=workflow, recipient=recipient, payload=payload)
    _run_to_the_end(done)
    delivery = Delivery.objects.get(instance=done, channel="email")
    DeliveryEvent.objects.create(
        delivery=delivery,
        provider="anymail",
        provider_event="delivered",
        received_at=timezone.now(),
        raw={"recipient": recipient.email, "tags": [f"to {recipient.phone}"]},
    )
    InboxEvent.objects.create(
        instance=done, name="reply", context={"from": recipient.email}, received_at=timezone.now()
    )
    waiting = TriggerInstanceFactory(
        workflow=workflow, recipient=recipient, payload=payload, available_at=timezone.now()
    )
    return done, waiting


def _dump(model, **lookup) -> str:
    return serializers.serialize("json", model.objects.filter(**lookup).order_by("pk"))


@pytest.fixture
def people(dispatched):
    workflow = WorkflowFactory()
    ada = RecipientFactory(id="ada", email="ada@example.com", phone="+15550001111")
    bob = RecipientFactory(id="bob", email="bob@example.com", phone="+15550002222")
    newsletter = RecipientListFactory()
    ListMembership.objects.create(list=newsletter, recipient=ada)
    ListMembership.objects.create(list=newsletter, recipient=bob)
    opt_out(recipient_id="ada", scope="categories.marketing", source="api")
    ada_done, ada_waiting = _person(workflow, ada)
    bob_done, _ = _person(workflow, bob)
    assert ada_done.status == TriggerStatus.COMPLETED
    return ada, ada_done, ada_waiting, bob_done


def test_nothing_of_the_person_is_left_and_nobody_else_changes(people, api):
    ada, ada_done, ada_waiting, bob_done = people
    # Before: the addresses are everywhere in Ada's history (the test would prove nothing).
    assert "ada@example.com" in _dump(Delivery).lower()
    assert "+15550001111" in _dump(StepExecutionLog)
    others = {model: _dump(model, **_of_instance(model, bob_done)) for model in HISTORY}

    response = api.delete("/api/v1/recipients/ada/")
    assert response.status_code == 204, response.content

    for model in HISTORY:
        rows = _dump(model).lower()
        assert "ada@example.com" not in rows, model.__name__
        assert "+15550001111" not in rows, model.__name__
    assert Delivery.objects.filter(instance=ada_done, recipient=ERASED).count() == 2
    ada_done.refresh_from_db()
    assert ada_done.payload == {
        "name": "Ada",
        "email": ERASED,
        "phone": ERASED,
        "user_id": ERASED,
    }
    for model in HISTORY:
        assert _dump(model, **_of_instance(model, bob_done)) == others[model], model.__name__
    assert "bob@example.com" in _dump(Delivery)
    assert not Recipient.objects.filter(pk="ada").exists()
    assert not ListMembership.objects.filter(recipient_id="ada").exists()
    assert not OptOut.objects.filter(recipient_id="ada").exists()
    assert ListMembership.objects.filter(recipient_id="bob").count() == 1


def test_unfinished_instances_are_cancelled_and_all_are_marked_erased(people):
    ada, ada_done, ada_waiting, bob_done = people
    erasure = recipient_erase(recipient_id="ada", actor="api:admin")
    assert (erasure.instances, erasure.cancelled) == (2, 1)
    ada_waiting.refresh_from_db()
    assert ada_waiting.status == TriggerStatus.CANCELLED
    change = ada_waiting.status_changes.order_by("at", "id").last()
    assert (change.reason, change.actor) == ("recipient erased", "api:admin")
    ada_done.refresh_from_db()
    assert ada_done.status == TriggerStatus.COMPLETED
    for instance in (ada_done, ada_waiting):
        instance.refresh_from_db()
        assert (instance.recipient_id, instance.recipient_erased) == (None, True)
    bob_done.refresh_from_db()
    assert (bob_done.recipient_id, bob_done.recipient_erased) == ("bob", False)


def test_a_failure_midway_leaves_everything_as_it_was(people, monkeypatch):
    ada, ada_done, ada_waiting, _ = people
    before = {model: _dump(model) for model in HISTORY}

    def broken(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Recipient, "delete", broken)
    with pytest.raises(RuntimeError):
        recipient_erase(recipient_id="ada", actor="t")
    assert Recipient.objects.filter(pk="ada").exists()
    for model in HISTORY:
        assert _dump(model) == before[model], model.__name__


def test_a_provider_report_arriving_after_the_erasure_keeps_nothing_of_the_person(people):
    from executions.tracking import delivery_status_record

    ada, ada_done, _, _ = people
    delivery = Delivery.objects.get(instance=ada_done, channel="email")
    recipient_erase(recipient_id="ada", actor="t")
    event = delivery_status_record(
        provider="anymail",
        message_id=delivery.provider_message_id,
        provider_event="opened",
        status="opened",
        raw={"recipient": "ada@example.com", "ua": "Mail for +15550001111"},
    )
    assert event is not None and event.raw == {"erased": ERASED}
    assert "ada@example.com" not in _dump(DeliveryEvent).lower()


def test_another_persons_instance_under_a_key_that_is_the_id_keeps_its_key(dispatched):
    """Recipient "7" keyed by user id; recipient "42"'s order 7 keyed "7" in another
    workflow: erasing 7 must not free 42's key (a retry would send twice) nor touch
    42's payload; a key holding 7's address is scrubbed wherever it is."""
    seven = RecipientFactory(id="7", email="jo@x.co")
    other = RecipientFactory(id="42", email="jo@x.com")
    TriggerInstanceFactory(recipient=seven, idempotency_key="7")
    order = TriggerInstanceFactory(
        workflow=WorkflowFactory(), recipient=other, idempotency_key="7", payload={"n": "7"}
    )
    TriggerInstanceFactory(recipient=seven, idempotency_key="welcome-jo@x.co")
    shared = TriggerInstanceFactory(
        workflow=WorkflowFactory(), recipient=other, idempotency_key="welcome-jo@x.co"
    )
    kept = TriggerInstanceFactory(recipient=other, idempotency_key="welcome-jo@x.com")

    recipient_erase(recipient_id="7", actor="t")

    order.refresh_from_db()
    assert (order.idempotency_key, order.payload) == ("7", {"n": "7"})
    assert TriggerInstance.objects.get(pk=kept.pk).idempotency_key == "welcome-jo@x.com"
    shared.refresh_from_db()
    assert shared.idempotency_key == f"erased:{shared.pk}"


def test_an_unknown_recipient_is_not_found():
    with pytest.raises(NotFoundError):
        recipient_erase(recipient_id="nobody", actor="t")


@pytest.mark.postgres
def test_only_an_erasure_may_update_history_and_only_while_it_runs(people):
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        StepExecutionLog.objects.update(error="rewritten")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL notifyflow.erasure = on")
        StepExecutionLog.objects.update(error="rewritten")
        with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
            StepExecutionLog.objects.all()._raw_delete(StepExecutionLog.objects.db)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL notifyflow.erasure = off")
    # An erasure inside a caller's transaction (here: the test's) turns it off again.
    recipient_erase(recipient_id="ada", actor="t")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        TriggerStatusChange.objects.update(reason="after the erasure")


def _of_instance(model, instance: TriggerInstance) -> dict:
    if model is TriggerInstance:
        return {"pk": instance.pk}
    if model in (DeliveryAttempt, DeliveryEvent):
        return {"delivery__instance": instance}
    if model is StepExecutionLog:
        return {"trigger": instance}
    return {"instance": instance}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_erasing_a_person_whose_instance_waits_on_a_real_worker(api, tmp_path):
    """Triggered over HTTP, the email sent by a real worker, the instance parked on a
    1-hour delay: DELETE cancels it and leaves no address in what the worker wrote."""
    from tests.factories import email_sms_definition
    from tests.worker import celery_worker, flush_broker, wait_until

    flush_broker()
    workflow = WorkflowFactory(definition=email_sms_definition(delay="1h"))
    people = {
        "ada": RecipientFactory(id="ada", email="ada@example.com", phone="+15550001111"),
        "bob": RecipientFactory(id="bob", email="bob@example.com", phone="+15550002222"),
    }
    ids = {}
    with celery_worker(tmp_path):
        for name, person in people.items():
            payload = {"name": name, "email": person.email, "phone": person.phone}
            body = {"workflow": workflow.key, "idempotency_key": name, "payload": payload}
            response = api.post("/api/v1/triggers/", body, format="json")
            assert response.status_code == 201, response.content
            ids[name] = response.json()["id"]
            TriggerInstance.objects.filter(pk=ids[name]).update(recipient=person)
        wait_until(
            lambda: Delivery.objects.filter(instance_id__in=ids.values()).count() == 2,
            timeout=180,
            what="both emails sent",
        )
        response = api.delete("/api/v1/recipients/ada/")
        assert response.status_code == 204, response.content
    ada = TriggerInstance.objects.get(pk=ids["ada"])
    assert (ada.status, ada.recipient_erased) == (TriggerStatus.CANCELLED, True)
    bob = TriggerInstance.objects.get(pk=ids["bob"])
    assert (bob.status, bob.recipient_id) == (TriggerStatus.ENQUEUED, "bob")
    for model in HISTORY:
        rows = _dump(model).lower()
        assert "ada@example.com" not in rows and "+15550001111" not in rows, model.__name__
    assert Delivery.objects.get(instance_id=ids["bob"]).recipient == "bob@example.com"
