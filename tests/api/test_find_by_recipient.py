""" "Find the notification we sent to ada@example.com": deliveries record the rendered
recipient, and the admin search and GET /api/v1/triggers/?recipient= find the instances
by email address or phone number."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from executions.engine import step_execute
from executions.models import Delivery, normalize_recipient
from executions.outcomes import StepOutcome
from notifyflow.ids import short_id
from tests.admin_helpers import PASSWORD, make_operator
from tests.factories import PAYLOAD, WorkflowFactory
from triggers.services import trigger_create

pytestmark = pytest.mark.django_db


def sent(key: str, **payload) -> str:
    instance = trigger_create(
        workflow="welcome", idempotency_key=key, payload={**PAYLOAD, **payload}
    ).instance
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.COMPLETED
    return str(instance.pk)


@pytest.fixture
def deliveries(db):
    WorkflowFactory(key="welcome")
    return {
        "ada": sent("ada", email="Ada@Example.com", phone="+15005550006"),
        "bob": sent("bob", email="bob@example.com", phone="+15005550007"),
    }


def test_deliveries_record_the_rendered_recipient_normalized(deliveries):
    rows = dict(
        Delivery.objects.filter(instance_id=deliveries["ada"]).values_list("channel", "recipient")
    )
    assert rows == {"email": "ada@example.com", "sms": "+15005550006"}


def test_normalization_of_addresses_and_numbers():
    assert normalize_recipient(" Ada Lovelace <ADA@example.com> ") == "ada@example.com"
    assert normalize_recipient("+1 (500) 555-0006") == "+15005550006"


def test_api_lists_instances_by_recipient(api, deliveries):
    for term, expected in (
        ("ada@example.com", ["ada"]),
        ("ADA@EXAMPLE.COM", ["ada"]),
        ("+15005550007", ["bob"]),
        ("nobody@example.com", []),
    ):
        response = api.get("/api/v1/triggers/", {"recipient": term})
        assert response.status_code == 200, response.content
        ids = [row["id"] for row in response.json()["results"]]
        assert ids == [deliveries[name] for name in expected], term
    combined = api.get("/api/v1/triggers/", {"recipient": "ada@example.com", "status": "failed"})
    assert combined.json()["results"] == []


def test_admin_search_finds_instances_by_recipient(deliveries):
    make_operator("olive")
    client = Client()
    client.login(request=HttpRequest(), username="olive", password=PASSWORD)
    url = reverse("admin:triggers_triggerinstance_changelist")
    page = client.get(url, {"q": "ada@example.com"}).content.decode()
    assert short_id(deliveries["ada"]) in page and short_id(deliveries["bob"]) not in page
    page = client.get(url, {"q": "+1 500 555 0007"}).content.decode()
    assert short_id(deliveries["bob"]) in page and short_id(deliveries["ada"]) not in page
    page = client.get(
        reverse("admin:executions_delivery_changelist"), {"q": "bob@example.com"}
    ).content.decode()
    assert "bob@example.com" in page and "ada@example.com" not in page
