"""POST /api/v1/events/: fan-out to bindings, outcomes, skips, and the documented
examples (docs/api.md#real-world-examples)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from tests.factories import WorkflowFactory, WorkflowTriggerFactory
from triggers.events import event_receive
from triggers.models import TriggerInstance
from triggers.models.events import EventRecord

URL = "/api/v1/events/"
pytestmark = pytest.mark.django_db


def post(api, body):
    return api.post(URL, body, format="json")


def outcome_of(response, binding):
    return next(o for o in response.json()["outcomes"] if o["binding"] == binding.pk)


def test_event_fans_out_to_two_bindings_one_skipped(api):
    created = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        idempotency_setting={"strategy": "CONTEXT_BASED", "contextFields": ["userId"]},
    )
    strict = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        idempotency_setting={
            "strategy": "CONTEXT_BASED",
            "contextFields": ["sessionId"],
            "failOnMissingContext": True,
        },
    )
    WorkflowTriggerFactory(event_name="OTHER_EVENT")
    WorkflowTriggerFactory(event_name="LEARNER_BATCH_ENROLLMENT", is_active=False)

    response = post(
        api,
        {
            "name": "LEARNER_BATCH_ENROLLMENT",
            "event_id": "ev-1",
            "context": {"userId": "u1", "email": "a@example.com"},
        },
    )

    assert response.status_code == 202, response.json()
    body = response.json()
    assert [o["binding"] for o in body["outcomes"]] == [created.pk, strict.pk]
    ok = outcome_of(response, created)
    instance = TriggerInstance.objects.get(pk=ok["instance_id"])
    assert ok["status"] == "created"
    assert ok["workflow"] == created.workflow.key
    assert ok["idempotency_key"] == f"trigger_{created.pk}_userId_u1" == instance.idempotency_key
    assert instance.workflow == created.workflow
    assert instance.payload == {"userId": "u1", "email": "a@example.com"}
    skipped = outcome_of(response, strict)
    assert skipped["status"] == "skipped" and skipped["instance_id"] is None
    assert skipped["code"] == "missing_context" and "sessionId" in skipped["reason"]
    assert not TriggerInstance.objects.filter(workflow=strict.workflow).exists()

    record = EventRecord.objects.get(pk=body["event"]["id"])
    assert body["event"]["name"] == record.name == "LEARNER_BATCH_ENROLLMENT"
    assert record.event_id == "ev-1"
    assert len(record.context_sha256) == 64
    assert [o["status"] for o in record.outcomes] == ["created", "skipped"]


def test_repeated_event_is_a_duplicate_and_logs_a_warning(api, caplog):
    binding = WorkflowTriggerFactory(
        event_name="E", idempotency_setting={"strategy": "EVENT_BASED", "includeEventId": True}
    )
    first = post(api, {"name": "E", "event_id": "x1", "context": {}})
    caplog.set_level(logging.WARNING, logger="notifyflow.events")
    second = post(api, {"name": "E", "event_id": "x1", "context": {"changed": True}})
    a, b = outcome_of(first, binding), outcome_of(second, binding)
    assert (a["status"], b["status"]) == ("created", "duplicate")
    assert a["instance_id"] == b["instance_id"]
    assert a["idempotency_key"] == b["idempotency_key"] == f"trigger_{binding.pk}_eventId_x1"
    assert TriggerInstance.objects.filter(workflow=binding.workflow).count() == 1
    assert "duplicate" in caplog.text and a["idempotency_key"] in caplog.text
    assert (
        outcome_of(post(api, {"name": "E", "event_id": "x2", "context": {}}), binding)["status"]
        == "created"
    )
    assert EventRecord.objects.filter(name="E").count() == 3


def test_event_with_no_bindings_is_accepted_and_recorded(api):
    response = post(api, {"name": "NOBODY_LISTENS", "context": {"a": 1}})
    assert response.status_code == 202
    assert response.json()["outcomes"] == []
    assert response.json()["event"]["event_id"] is None
    assert EventRecord.objects.filter(name="NOBODY_LISTENS").count() == 1


def test_context_is_optional_and_defaults_to_empty(api):
    binding = WorkflowTriggerFactory(event_name="E")
    response = post(api, {"name": "E"})
    assert response.status_code == 202
    assert (
        TriggerInstance.objects.get(pk=outcome_of(response, binding)["instance_id"]).payload == {}
    )


def test_inactive_workflow_is_skipped_others_still_run(api):
    inactive_wf = WorkflowFactory(is_active=False)
    dead = WorkflowTriggerFactory(event_name="E", workflow=inactive_wf)
    alive = WorkflowTriggerFactory(event_name="E")
    response = post(api, {"name": "E", "context": {}})
    assert outcome_of(response, dead)["status"] == "skipped"
    assert outcome_of(response, dead)["code"] == "inactive_workflow"
    assert outcome_of(response, alive)["status"] == "created"


def test_expression_error_skips_the_binding_and_logs_an_error(api, caplog):
    bad = WorkflowTriggerFactory(
        event_name="E",
        idempotency_setting={"strategy": "CUSTOM_EXPRESSION", "customExpression": "#{ctx.user.id}"},
    )
    good = WorkflowTriggerFactory(
        event_name="E",
        idempotency_setting={
            "strategy": "CUSTOM_EXPRESSION",
            "customExpression": "role_#{ctx.user}",
        },
    )
    caplog.set_level(logging.ERROR, logger="notifyflow.events")
    response = post(api, {"name": "E", "context": {"user": "not-a-map"}})
    assert outcome_of(response, bad)["status"] == "skipped"
    assert outcome_of(response, bad)["code"] == "expression_error"
    assert outcome_of(response, good)["idempotency_key"] == "role_not-a-map"
    assert f"workflow trigger {bad.pk} skipped" in caplog.text


def test_binding_with_hand_written_invalid_setting_runs_as_uuid(api, caplog):
    binding = WorkflowTriggerFactory(
        event_name="E", idempotency_setting={"strategy": "TIME_WINDOW"}
    )
    caplog.set_level(logging.WARNING, logger="notifyflow.idempotency")
    response = post(api, {"name": "E", "context": {}})
    outcome = outcome_of(response, binding)
    assert outcome["status"] == "created" and outcome["code"] == "settings_fallback"
    assert "ttlMinutes" in outcome["reason"]
    assert "falling back to UUID" in caplog.text
    again = outcome_of(post(api, {"name": "E", "context": {}}), binding)
    assert again["status"] == "created" and again["instance_id"] != outcome["instance_id"]


def test_uuid_strategy_never_deduplicates(api):
    binding = WorkflowTriggerFactory(event_name="E", idempotency_setting={"strategy": "NONE"})
    ids = {
        outcome_of(post(api, {"name": "E", "event_id": "same", "context": {}}), binding)[
            "instance_id"
        ]
        for _ in range(3)
    }
    assert len(ids) == 3


@pytest.mark.parametrize(
    ("body", "field", "status"),
    [
        ({}, "name", 400),
        ({"name": ""}, "name", 400),
        ({"name": "   "}, "name", 400),
        ({"name": 5, "context": {}}, "name", 400),
        ({"name": "x" * 201}, "name", 400),
        ({"name": "E", "context": []}, "context", 400),
        ({"name": "E", "context": "a"}, "context", 400),
        ({"name": "E", "context": None}, "context", 400),
        ({"name": "E", "event_id": 12}, "event_id", 400),
        ({"name": "E", "event_id": ""}, "event_id", 400),
        ({"name": "E", "event_id": ["a"]}, "event_id", 400),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, body, field, status):
    WorkflowTriggerFactory(event_name="E")
    response = post(api, body)
    assert response.status_code == status
    assert response.json()["field"] == field
    assert response.json()["message"].startswith(f"{field}:")
    assert not TriggerInstance.objects.exists()
    assert not EventRecord.objects.exists()


def test_body_not_an_object_or_malformed(api):
    assert api.post(URL, [1], format="json").status_code == 400
    response = api.post(URL, "{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "body"


def test_oversized_context_is_413(api, settings):
    settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES = 100
    response = post(api, {"name": "E", "context": {"blob": "x" * 200}})
    assert response.status_code == 413 and response.json()["field"] == "context"


def test_events_need_an_api_key(client):
    assert client.post(URL, {"name": "E"}, content_type="application/json").status_code == 401


# --- docs/api.md "Real-world examples", as written --------------------------------------


def test_seed_example_1_enrollment_once_per_user_and_session(api):
    binding = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        idempotency_setting={
            "strategy": "CONTEXT_BASED",
            "contextFields": ["userId", "sessionId"],
            "failOnMissingContext": True,
        },
    )
    ctx = {"userId": "user123", "packageId": "pkg456", "sessionId": "session789"}

    def send(context, event_id):
        return outcome_of(
            post(
                api, {"name": "LEARNER_BATCH_ENROLLMENT", "event_id": event_id, "context": context}
            ),
            binding,
        )

    first = send(ctx, "event123")
    assert first["status"] == "created"
    assert first["idempotency_key"] == (f"trigger_{binding.pk}_userId_user123_sessionId_session789")
    assert send({**ctx, "packageId": "other"}, "event124")["status"] == "duplicate"
    assert send({**ctx, "sessionId": "session790"}, "event125")["status"] == "created"
    assert send({**ctx, "userId": "user124"}, "event126")["status"] == "created"
    missing = send({"userId": "user123"}, "event127")
    assert missing["status"] == "skipped" and missing["code"] == "missing_context"
    assert TriggerInstance.objects.filter(workflow=binding.workflow).count() == 3


def test_seed_example_2_credentials_once_per_user_per_day():
    binding = WorkflowTriggerFactory(
        event_name="SEND_LEARNER_CREDENTIALS",
        idempotency_setting={
            "strategy": "CONTEXT_TIME_WINDOW",
            "contextFields": ["userId"],
            "ttlMinutes": 1440,
        },
    )
    day = datetime(2024, 5, 1, tzinfo=UTC)

    def send(user, at):
        result = event_receive(name="SEND_LEARNER_CREDENTIALS", context={"userId": user}, at=at)
        return result.outcomes[0]

    morning = send("u1", day + timedelta(hours=8))
    assert morning.status == "created"
    assert morning.idempotency_key == (
        f"trigger_{binding.pk}_userId_u1_{int(day.timestamp()) * 1000}"
    )
    assert send("u1", day + timedelta(hours=23, minutes=59)).status == "duplicate"
    assert send("u2", day + timedelta(hours=9)).status == "created"
    assert send("u1", day + timedelta(days=1)).status == "created"
    assert TriggerInstance.objects.filter(workflow=binding.workflow).count() == 3


def test_seed_example_3_batch_once_per_five_minute_window():
    binding = WorkflowTriggerFactory(
        event_name="SUB_ORG_MEMBER_ENROLLMENT",
        idempotency_setting={"strategy": "TIME_WINDOW", "ttlMinutes": 5},
    )
    start = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    statuses = [
        event_receive(
            name="SUB_ORG_MEMBER_ENROLLMENT", context={"batch": n}, at=start + timedelta(seconds=s)
        )
        .outcomes[0]
        .status
        for n, s in enumerate([0, 60, 299, 300, 599, 600])
    ]
    assert statuses == ["created", "duplicate", "duplicate", "created", "duplicate", "created"]
    assert TriggerInstance.objects.filter(workflow=binding.workflow).count() == 3
