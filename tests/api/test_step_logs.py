from __future__ import annotations

import pytest

from executions import engine
from tests.factories import TriggerInstanceFactory, WorkflowFactory

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


@pytest.fixture
def ran(dispatched):
    """Two instances that each ran both nodes (email, then SMS)."""
    workflow = WorkflowFactory()
    instances = TriggerInstanceFactory.create_batch(2, workflow=workflow)
    for instance in instances:
        engine.step_execute(instance_id=instance.pk)
        engine.step_execute(instance_id=instance.pk)
    return instances


def test_steps_of_a_trigger_oldest_first(api, ran):
    body = api.get(f"/api/v1/triggers/{ran[0].pk}/steps/").json()
    rows = body["results"]
    assert [(r["node_id"], r["node_type"], r["success"]) for r in rows] == [
        ("hello", "email", True),
        ("text", "sms", True),
    ]
    assert all(r["trigger"] == str(ran[0].pk) for r in rows)
    assert rows[0]["started_at"] <= rows[1]["started_at"]
    # The payload is held once, by the instance; the log refers to it.
    assert rows[0]["input_context"]["payload"] == {"$ref": "instance.payload"}
    assert rows[0]["input_context"]["trigger"]["id"] == str(ran[0].pk)
    assert rows[0]["output"]["message_id"]


def test_steps_of_an_unknown_trigger_is_404(api, db):
    response = api.get("/api/v1/triggers/00000000-0000-0000-0000-000000000000/steps/")
    assert response.status_code == 404


def test_step_logs_filter_by_trigger_and_node(api, ran):
    all_rows = api.get("/api/v1/step-logs/").json()["results"]
    assert len(all_rows) == 4
    by_node = api.get("/api/v1/step-logs/", {"node": "text"}).json()["results"]
    assert {r["trigger"] for r in by_node} == {str(i.pk) for i in ran}
    assert {r["node_id"] for r in by_node} == {"text"}
    both = api.get("/api/v1/step-logs/", {"node": "hello", "trigger": str(ran[1].pk)}).json()
    assert [(r["trigger"], r["node_id"]) for r in both["results"]] == [(str(ran[1].pk), "hello")]


def test_step_logs_bad_filter_is_400_naming_it(api, db):
    response = api.get("/api/v1/step-logs/", {"trigger": "not-a-uuid"})
    assert response.status_code == 400 and response.json()["field"] == "trigger"


def test_step_logs_need_auth(client, db):
    assert client.get("/api/v1/step-logs/").status_code == 401


def test_step_logs_filter_by_skip_reason_and_the_timeline_shows_it(api, dispatched):
    """Skips are successful steps with a reason: filterable, and shown in the
    instance's timeline."""
    from tests.factories import RecipientFactory

    definition = {
        "entry_node_id": "hello",
        "nodes": [{"id": "hello", "type": "email", "config": {"subject": "s", "body": "b"}}],
        "edges": [],
    }
    workflow = WorkflowFactory(definition=definition)
    opted_out = RecipientFactory(preferences={"channels": {"email": False}})
    no_email = RecipientFactory(email=None)
    sent = RecipientFactory()
    instances = {
        person.pk: TriggerInstanceFactory(workflow=workflow, recipient=person)
        for person in (opted_out, no_email, sent)
    }
    for instance in instances.values():
        engine.step_execute(instance_id=instance.pk)
    rows = api.get("/api/v1/step-logs/", {"skip_reason": "preference_opt_out"}).json()["results"]
    assert [(r["trigger"], r["skip_reason"], r["success"]) for r in rows] == [
        (str(instances[opted_out.pk].pk), "preference_opt_out", True)
    ]
    assert rows[0]["output"] == {
        "skipped": True,
        "reason": "preference_opt_out",
        "rule": "channels.email",
    }
    assert rows[0]["input_context"]["recipient"] == {"$ref": "recipient", "id": opted_out.pk}
    rows = api.get("/api/v1/step-logs/", {"skip_reason": "missing_channel_data"}).json()
    assert [r["trigger"] for r in rows["results"]] == [str(instances[no_email.pk].pk)]
    everything = api.get("/api/v1/step-logs/").json()["results"]
    assert sorted(r["skip_reason"] for r in everything) == [
        "",
        "missing_channel_data",
        "preference_opt_out",
    ]
    timeline = api.get(f"/api/v1/triggers/{instances[opted_out.pk].pk}/timeline/").json()
    assert [s["skip_reason"] for s in timeline["steps"]] == ["preference_opt_out"]


def test_step_logs_unknown_skip_reason_is_400(api, db):
    response = api.get("/api/v1/step-logs/", {"skip_reason": "bored"})
    assert response.status_code == 400 and response.json()["field"] == "skip_reason"
