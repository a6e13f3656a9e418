"""Retry and run now over the API: the admin's services, the API key as the
audited actor, 409 with a stable code when the instance's state does not allow it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerStatus, TriggerStatusChange

pytestmark = pytest.mark.django_db
S = TriggerStatus
URL = "/api/v1/triggers/"
MISSING = "00000000-0000-0000-0000-000000000000"


def _failed():
    return TriggerInstanceFactory(
        workflow=WorkflowFactory(),
        status=S.FAILED,
        attempts=4,
        last_error="node hello: boom",
        finished_at=timezone.now(),
    )


def test_retry_of_a_failed_instance_enqueues_it_now_audited_with_the_key_name(api, dispatched):
    instance = _failed()
    response = api.post(f"{URL}{instance.pk}/retry/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["id"] == str(instance.pk)
    assert (body["status"], body["attempts"], body["last_error"]) == ("enqueued", 0, "")
    assert body["finished_at"] is None
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert (change.from_status, change.to_status, change.actor) == (
        "failed",
        "enqueued",
        "api:tests",
    )
    assert dispatched == [(str(instance.pk), None)]


def test_retry_of_an_instance_that_is_not_failed_is_409_not_failed(api, dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    response = api.post(f"{URL}{instance.pk}/retry/")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "not_failed" and "enqueued" in body["message"]
    assert not TriggerStatusChange.objects.filter(instance=instance).exists()
    assert dispatched == []


def test_run_now_makes_a_waiting_instance_due_audited_with_the_key_name(api, dispatched):
    later = timezone.now() + timedelta(hours=2)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(), available_at=later)
    before = timezone.now()
    response = api.post(f"{URL}{instance.pk}/run-now/")
    assert response.status_code == 200, response.json()
    instance.refresh_from_db()
    assert before <= instance.available_at <= timezone.now()
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert (change.from_status, change.to_status, change.actor) == (
        "enqueued",
        "enqueued",
        "api:tests",
    )
    assert dispatched == [(str(instance.pk), None)]


@pytest.mark.parametrize(
    "status, due_in, named",
    [
        (S.ENQUEUED, timedelta(0), "already due"),
        (S.COMPLETED, timedelta(hours=1), "completed"),
        (S.FAILED, timedelta(hours=1), "failed"),
        (S.CANCELLED, timedelta(hours=1), "cancelled"),
    ],
)
def test_run_now_of_an_instance_not_waiting_is_409_not_waiting(api, status, due_in, named):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(), status=status, available_at=timezone.now() + due_in
    )
    response = api.post(f"{URL}{instance.pk}/run-now/")
    assert response.status_code == 409
    assert response.json()["code"] == "not_waiting"
    assert named in response.json()["message"]


@pytest.mark.parametrize("action", ["retry", "run-now"])
def test_operator_actions_on_an_unknown_instance_are_404(api, action):
    response = api.post(f"{URL}{MISSING}/{action}/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


@pytest.mark.parametrize("action", ["retry", "run-now"])
def test_operator_actions_need_an_api_key(client, action):
    instance = _failed()
    response = client.post(f"{URL}{instance.pk}/{action}/")
    assert response.status_code == 401
    instance.refresh_from_db()
    assert instance.status == S.FAILED
