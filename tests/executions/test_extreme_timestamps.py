"""Timestamps a payload can produce are range-checked where they enter (a delay's
``until``: at most the 3,650-day cap a duration has at save, the past continues at once;
a provider's tracking timestamp: dropped if PostgreSQL could not give it back), and no
instance timestamp the engine can store makes a page answer 500."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions import engine
from tests.admin_helpers import make_superuser
from tests.console.test_instances import logged_in
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = pytest.mark.django_db
S = TriggerStatus

UNTIL_FROM_PAYLOAD = {
    "entry_node_id": "later",
    "nodes": [
        {"id": "later", "type": "delay", "config": {"until": "{{ payload.at }}"}},
        {"id": "text", "type": "sms", "config": {"to": "+15005550006", "body": "hi"}},
    ],
    "edges": [{"from": "later", "to": "text"}],
}


def _triggered(api, at: str) -> TriggerInstance:
    workflow = WorkflowFactory(definition=UNTIL_FROM_PAYLOAD)
    response = api.post(
        "/api/v1/triggers/",
        {"workflow": workflow.key, "idempotency_key": at, "payload": {"at": at}},
        format="json",
    )
    assert response.status_code in (201, 202), response.json()
    instance_id = response.json()["id"]
    engine.step_execute(instance_id=instance_id)
    return TriggerInstance.objects.get(pk=instance_id)


def _pages_answer(api, instance: TriggerInstance) -> dict[str, int]:
    """The status of every page that shows the instance, or acts on it."""
    admin = logged_in(make_superuser())
    base = f"/api/v1/triggers/{instance.pk}/"
    return {
        "list": api.get("/api/v1/triggers/").status_code,
        "list with payload": api.get("/api/v1/triggers/?include_payload=true").status_code,
        "detail": api.get(base).status_code,
        "timeline": api.get(f"{base}timeline/").status_code,
        "steps": api.get(f"{base}steps/").status_code,
        "admin list": admin.get(reverse("admin:triggers_triggerinstance_changelist")).status_code,
        "admin detail": admin.get(
            reverse("admin:triggers_triggerinstance_change", args=[instance.pk])
        ).status_code,
        "run-now": api.post(f"{base}run-now/").status_code,
        "cancel": api.post(f"{base}cancel/", {}, format="json").status_code,
    }


@pytest.mark.parametrize(
    "at",
    [
        # Valid for Python, but year 10000 in UTC: PostgreSQL stores it, nothing reads it.
        "9999-12-31T23:59:59-05:00",
        "9999-12-31T23:59:59Z",
        "ten years and a day from now",
    ],
)
def test_until_beyond_the_cap_fails_permanently_naming_the_node_and_every_page_answers(
    api, dispatched, at
):
    if at == "ten years and a day from now":  # made here: ids must be the same in every
        at = (datetime.now(UTC) + timedelta(days=3651)).isoformat()  # pytest-xdist process
    instance = _triggered(api, at)
    assert instance.status == S.FAILED
    assert instance.last_error.startswith("node later: until:")
    assert "3650 days" in instance.last_error
    assert instance.attempts == 1  # permanent: not retried
    pages = _pages_answer(api, instance)
    # Finished: run-now and cancel refuse with a 409, the rest show it.
    assert pages == {**dict.fromkeys(pages, 200), "run-now": 409, "cancel": 409}


def test_until_within_the_cap_waits_and_every_page_answers(api, dispatched):
    at = datetime.now(UTC) + timedelta(days=3649)
    instance = _triggered(api, at.isoformat())
    assert (instance.status, instance.current_node_id) == (S.ENQUEUED, "text")
    assert instance.available_at == at
    assert set(_pages_answer(api, instance).values()) == {200}


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+05:00", "1970-01-01T00:00:00Z"])
def test_until_in_the_past_continues_at_once(api, dispatched, at):
    before = timezone.now()
    instance = _triggered(api, at)
    assert (instance.status, instance.current_node_id) == (S.ENQUEUED, "text")
    assert before <= instance.available_at <= timezone.now()


def test_pages_answer_for_the_latest_instant_a_row_can_hold(api, dispatched):
    """The calendar's last microsecond in every timestamp of the row (as a hand-edited
    row or an old version could have left it): still shown, run now and cancelled."""
    last = datetime.max.replace(tzinfo=UTC)
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=UNTIL_FROM_PAYLOAD),
        current_node_id="text",
        available_at=last,
        wait_deadline=last,
    )
    assert set(_pages_answer(api, instance).values()) == {200}


@pytest.mark.parametrize(
    ("at", "kept"),
    [
        ("9999-12-31T23:59:59-05:00", None),  # year 10000 in UTC: not storable
        ("2026-11-25T08:00:00-05:00", datetime(2026, 11, 25, 13, tzinfo=UTC)),
    ],
)
def test_a_provider_timestamp_past_the_calendar_is_not_stored_and_pages_answer(
    api, settings, at, kept
):
    """A tracking webhook's own timestamp (postmark's DeliveredAt) is the provider's:
    kept when PostgreSQL can give it back, dropped (the event is still recorded)."""
    from executions.models import Delivery, DeliveryEvent

    settings.ANYMAIL = {"WEBHOOK_SECRET": "hook:s3cret"}
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    delivery = Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        status="sent",
        provider_message_id="pm-1",
        attempts=1,
    )
    event = {
        "RecordType": "Delivery",
        "ServerId": 23,
        "MessageID": "pm-1",
        "Recipient": "recipient@example.com",
        "DeliveredAt": at,
        "Details": "delivered",
    }
    response = Client().post(
        "/webhooks/anymail/postmark/tracking/",
        data=json.dumps(event),
        content_type="application/json",
        HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"hook:s3cret").decode(),
    )
    assert response.status_code == 200
    assert DeliveryEvent.objects.get(delivery=delivery).occurred_at == kept
    admin = logged_in(make_superuser())
    assert api.get(f"/api/v1/triggers/{instance.pk}/deliveries/").status_code == 200
    assert admin.get(reverse("admin:executions_delivery_changelist")).status_code == 200
    page = reverse("admin:executions_delivery_change", args=[delivery.pk])
    assert admin.get(page).status_code == 200


@pytest.mark.postgres
def test_pages_answer_for_a_row_stored_past_the_calendar(api, dispatched):
    """A row written before these checks existed (or by hand): year 10000, 'infinity'
    and BC read as the calendar's edges instead of failing every page that lists it."""
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=UNTIL_FROM_PAYLOAD), current_node_id="text"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TriggerInstance._meta.db_table} SET available_at = %s,"
            " wait_deadline = 'infinity', locked_until = '0044-03-15 00:00:00+00 BC'"
            " WHERE id = %s",
            ["10000-01-01 04:59:59+00", instance.pk],
        )
    instance = TriggerInstance.objects.get(pk=instance.pk)
    assert instance.available_at == instance.wait_deadline == datetime.max.replace(tzinfo=UTC)
    assert instance.locked_until == datetime.min.replace(tzinfo=UTC)
    assert set(_pages_answer(api, instance).values()) == {200}
