"""/api/v1/workflow-triggers/: CRUD with validated settings, and preview-key."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from tests.factories import WorkflowFactory, WorkflowTriggerFactory
from triggers.models.events import WorkflowTrigger

URL = "/api/v1/workflow-triggers/"
pytestmark = pytest.mark.django_db


def detail(binding_id: int) -> str:
    return f"{URL}{binding_id}/"


def test_create_normalizes_the_setting_and_returns_201(api, workflow):
    response = api.post(
        URL,
        {
            "event_name": "SEND_LEARNER_CREDENTIALS",
            "workflow": workflow.key,
            "idempotency_setting": {
                "strategy": "CONTEXT_TIME_WINDOW",
                "contextFields": ["userId"],
                "ttlMinutes": 1440,
            },
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["workflow"] == workflow.key and body["is_active"] is True
    assert body["idempotency_setting"] == {
        "strategy": "CONTEXT_TIME_WINDOW",
        "ttlMinutes": 1440,
        "contextFields": ["userId"],
        "includeTriggerId": True,
        "includeEventType": False,
        "includeEventId": False,
        "customExpression": None,
        "failOnMissingContext": False,
    }
    stored = WorkflowTrigger.objects.get(pk=body["id"])
    assert stored.idempotency_setting == body["idempotency_setting"]


def test_create_without_setting_is_uuid(api, workflow):
    response = api.post(URL, {"event_name": "E", "workflow": workflow.key}, format="json")
    assert response.status_code == 201
    assert response.json()["idempotency_setting"]["strategy"] == "UUID"


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"strategy": "TIME_WINDOW"}, "idempotency_setting.ttlMinutes"),
        ({"strategy": "TIME_WINDOW", "ttlMinutes": "15"}, "idempotency_setting.ttlMinutes"),
        ({"strategy": "CONTEXT_BASED"}, "idempotency_setting.contextFields"),
        (
            {"strategy": "CONTEXT_BASED", "contextFields": ["ok", 1]},
            "idempotency_setting.contextFields[1]",
        ),
        (
            {"strategy": "CUSTOM_EXPRESSION", "customExpression": "#{boom}"},
            "idempotency_setting.customExpression",
        ),
        ({"strategy": "MAGIC"}, "idempotency_setting.strategy"),
        ({"strategy": "UUID", "colour": "red"}, "idempotency_setting.colour"),
        ({"strategy": "UUID", "includeTriggerId": "no"}, "idempotency_setting.includeTriggerId"),
        ("{not json", "idempotency_setting"),
        ([1], "idempotency_setting"),
    ],
)
def test_invalid_setting_is_a_400_naming_the_option(api, workflow, setting, field):
    response = api.post(
        URL,
        {"event_name": "E", "workflow": workflow.key, "idempotency_setting": setting},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["message"].startswith(f"{field}:")
    assert not WorkflowTrigger.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workflow": "WF"}, "event_name"),
        ({"event_name": "", "workflow": "WF"}, "event_name"),
        ({"event_name": 3, "workflow": "WF"}, "event_name"),
        ({"event_name": "E"}, "workflow"),
        ({"event_name": "E", "workflow": "no-such-workflow"}, "workflow"),
        ({"event_name": "E", "workflow": 7}, "workflow"),
        ({"event_name": "E", "workflow": "WF", "is_active": "yes"}, "is_active"),
    ],
)
def test_invalid_fields_are_a_400_naming_them(api, workflow, body, field):
    body = {k: (workflow.key if v == "WF" else v) for k, v in body.items()}
    response = api.post(URL, body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field


def test_list_get_put_delete(api):
    first = WorkflowTriggerFactory(event_name="A")
    second = WorkflowTriggerFactory(event_name="B")
    listing = api.get(URL).json()
    assert [b["id"] for b in listing["results"]] == [first.pk, second.pk]
    assert [b["id"] for b in api.get(URL, {"event_name": "B"}).json()["results"]] == [second.pk]
    assert [b["id"] for b in api.get(URL, {"workflow": first.workflow.key}).json()["results"]] == [
        first.pk
    ]

    assert api.get(detail(first.pk)).json()["event_name"] == "A"
    other = WorkflowFactory()
    response = api.put(
        detail(first.pk),
        {
            "event_name": "A2",
            "workflow": other.key,
            "is_active": False,
            "idempotency_setting": {"strategy": "TIME_WINDOW", "ttlMinutes": 5},
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    first.refresh_from_db()
    assert (first.event_name, first.workflow, first.is_active) == ("A2", other, False)
    assert first.idempotency_setting["ttlMinutes"] == 5

    bad = api.put(
        detail(first.pk),
        {
            "event_name": "A2",
            "workflow": other.key,
            "idempotency_setting": {"strategy": "TIME_WINDOW"},
        },
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "idempotency_setting.ttlMinutes"
    first.refresh_from_db()
    assert first.idempotency_setting["ttlMinutes"] == 5

    assert api.delete(detail(first.pk)).status_code == 204
    assert not WorkflowTrigger.objects.filter(pk=first.pk).exists()
    assert api.get(detail(first.pk)).status_code == 404
    assert api.put(detail(first.pk), {}, format="json").status_code == 404


def test_preview_key_for_a_time_window_binding(api):
    binding = WorkflowTriggerFactory(
        idempotency_setting={
            "strategy": "CONTEXT_TIME_WINDOW",
            "contextFields": ["userId"],
            "ttlMinutes": 15,
        }
    )
    response = api.post(
        f"{detail(binding.pk)}preview-key/",
        {"context": {"userId": "u1"}, "at": "2024-05-01T09:23:00Z"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    window = int(datetime(2024, 5, 1, 9, 15, tzinfo=UTC).timestamp()) * 1000
    assert response.json() == {
        "idempotency_key": f"trigger_{binding.pk}_userId_u1_{window}",
        "strategy": "CONTEXT_TIME_WINDOW",
        "random": False,
        "note": None,
    }
    # An offset is honoured; no offset means UTC.
    for at in ("2024-05-01T11:29:59+02:00", "2024-05-01T09:16:00"):
        again = api.post(
            f"{detail(binding.pk)}preview-key/",
            {"context": {"userId": "u1"}, "at": at},
            format="json",
        )
        assert again.json()["idempotency_key"] == response.json()["idempotency_key"]


def test_preview_key_defaults_to_now_and_event_id(api):
    binding = WorkflowTriggerFactory(
        idempotency_setting={
            "strategy": "EVENT_BASED",
            "includeEventType": True,
            "includeEventId": True,
        }
    )
    response = api.post(f"{detail(binding.pk)}preview-key/", {"event_id": "e9"}, format="json")
    assert response.json()["idempotency_key"] == (
        f"trigger_{binding.pk}_eventType_{binding.event_name}_eventId_e9"
    )
    missing = api.post(f"{detail(binding.pk)}preview-key/", {}, format="json")
    assert missing.status_code == 400 and missing.json()["field"] == "event_id"
    assert missing.json()["code"] == "missing_event_id"


def test_preview_key_for_uuid_says_it_is_random(api):
    binding = WorkflowTriggerFactory(idempotency_setting={"strategy": "UUID"})
    body = api.post(f"{detail(binding.pk)}preview-key/", {"context": {}}, format="json").json()
    assert re.fullmatch(rf"trigger_{binding.pk}_[0-9a-f-]{{36}}", body["idempotency_key"])
    assert body["random"] is True and "random" in body["note"]


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"context": [1]}, "context", "not_an_object"),
        ({"context": {}, "at": "yesterday"}, "at", "invalid"),
        ({"context": {}, "at": "2024-13-45T00:00:00Z"}, "at", "invalid"),
        ({"context": {}, "at": 12}, "at", "invalid"),
        ({"context": {}, "event_id": 3}, "event_id", "invalid"),
        ({"context": {"userId": "u"}}, "context.sessionId", "missing_context"),
    ],
)
def test_preview_key_bad_input_is_a_400(api, body, field, code):
    binding = WorkflowTriggerFactory(
        idempotency_setting={
            "strategy": "CONTEXT_BASED",
            "contextFields": ["userId", "sessionId"],
            "failOnMissingContext": True,
        }
    )
    response = api.post(f"{detail(binding.pk)}preview-key/", body, format="json")
    assert response.status_code == 400
    assert (response.json()["field"], response.json()["code"]) == (field, code)


def test_preview_key_unknown_binding_is_404(api):
    assert api.post(f"{detail(999999)}preview-key/", {}, format="json").status_code == 404
