"""GET /api/v1/triggers/{id}/timeline/: one call says where an instance is,
what happened to it and what it waits for, in a fixed number of queries."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from tests.factories import (
    PAYLOAD,
    TriggerInstanceFactory,
    WorkflowFactory,
    email_sms_definition,
    wait_definition,
)
from triggers import inbox
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import InboxEvent
from triggers.services import instance_cancel, trigger_create

pytestmark = pytest.mark.django_db
URL = "/api/v1/triggers/{}/timeline/"


def test_timeline_of_a_delayed_instance_shows_history_steps_and_the_pending_node(api, dispatched):
    wf = WorkflowFactory(definition=email_sms_definition(delay="1h"))
    instance = trigger_create(workflow=wf, idempotency_key="t1", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=instance.pk, task_id="task-1") == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED  # the delay node

    response = api.get(URL.format(instance.pk))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert set(body) == {"instance", "history", "steps", "inbox", "pending"}
    assert body["instance"]["id"] == str(instance.pk)
    assert body["instance"]["cursor"] == {"current_node_id": "text"}
    history = [(h["from_status"], h["to_status"]) for h in body["history"]]
    assert history == [
        ("", "enqueued"),
        ("enqueued", "processing"),
        ("processing", "enqueued"),
        ("enqueued", "processing"),
        ("processing", "enqueued"),
    ]
    assert body["history"][0]["reason"] == "created"
    assert set(body["history"][0]) == {"from_status", "to_status", "reason", "actor", "at"}
    assert [(s["node_id"], s["node_type"], s["success"]) for s in body["steps"]] == [
        ("hello", "email", True),
        ("wait", "delay", True),
    ]
    assert body["steps"][0]["task_id"] == "task-1"
    assert body["inbox"] == []
    pending = body["pending"]
    assert (pending["node_id"], pending["node_type"], pending["waiting_for"]) == (
        "text",
        "sms",
        None,
    )
    assert pending["due_at"] == body["instance"]["available_at"]
    instance.refresh_from_db()
    assert instance.available_at > timezone.now() + timedelta(minutes=59)


def test_a_finished_instance_has_no_pending_work(api, dispatched):
    instance = trigger_create(
        workflow=WorkflowFactory(), idempotency_key="t2", payload=PAYLOAD
    ).instance
    instance_cancel(instance_id=instance.pk, actor="ops", reason="not needed")
    body = api.get(URL.format(instance.pk)).json()
    assert body["pending"] is None and body["steps"] == []
    assert body["history"][-1]["to_status"] == "cancelled"
    assert body["history"][-1]["reason"] == "not needed"


def test_a_cursor_outside_its_version_is_pending_as_unknown(api):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(), current_node_id="ghost")
    pending = api.get(URL.format(instance.pk)).json()["pending"]
    assert (pending["node_id"], pending["node_type"]) == ("ghost", "unknown")


def test_timeline_of_a_waiting_instance_shows_its_inbox_and_what_it_waits_for(api, dispatched):
    wf = WorkflowFactory(definition=wait_definition(timeout="2h", match="event.context.ok"))
    instance = trigger_create(workflow=wf, idempotency_key="w1", payload=PAYLOAD).instance
    inbox.deliver(
        name="reply", event_id="nope", context={"ok": False}, subjects=[f"instance:{instance.pk}"]
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    body = api.get(URL.format(instance.pk)).json()
    assert [(e["name"], e["event_id"], e["consumed_at"]) for e in body["inbox"]] == [
        ("reply", "nope", None)
    ]
    waiting = body["pending"]["waiting_for"]
    assert (waiting["kind"], waiting["event"]) == ("event", "reply")
    assert waiting["deadline"] == body["pending"]["due_at"]
    inbox.deliver(
        name="reply", event_id="yes", context={"ok": True}, subjects=[f"instance:{instance.pk}"]
    )
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    body = api.get(URL.format(instance.pk)).json()
    consumed = {e["event_id"]: e["consumed_by_node"] for e in body["inbox"]}
    assert consumed == {"nope": None, "yes": "listen"}
    assert body["pending"]["waiting_for"] is None


def test_timeline_of_an_instance_parked_at_a_gate_names_the_gate(api):
    later = timezone.now() + timedelta(hours=3)
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(),
        available_at=later,
        wait_deadline=later,
        parked_on=ParkedOn.SEND_WINDOW,
    )
    waiting = api.get(URL.format(instance.pk)).json()["pending"]["waiting_for"]
    assert (waiting["kind"], waiting["event"]) == ("send_window", None)
    assert datetime.fromisoformat(waiting["deadline"].replace("Z", "+00:00")) == later


def test_timeline_of_an_unknown_instance_is_404(api):
    response = api.get(URL.format("00000000-0000-0000-0000-000000000000"))
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_timeline_needs_an_api_key(client):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    assert client.get(URL.format(instance.pk)).status_code == 401


def _with_history(workflow, key: str, steps: int):
    """An instance with ``steps`` step logs and two status changes per step."""
    instance = TriggerInstanceFactory(workflow=workflow, idempotency_key=key)
    now = timezone.now()
    TriggerStatusChange.objects.create(instance=instance, from_status="", to_status="enqueued")
    for n in range(steps):
        StepExecutionLog.objects.create(
            trigger=instance,
            workflow=workflow,
            workflow_version=1,
            node_id="hello",
            node_type="email",
            attempt=n + 1,
            started_at=now,
            finished_at=now,
            success=False,
            error="timeout",
            error_kind="transient",
        )
        for pair in (("enqueued", "processing"), ("processing", "enqueued")):
            TriggerStatusChange.objects.create(
                instance=instance, from_status=pair[0], to_status=pair[1]
            )
        InboxEvent.objects.create(instance=instance, name="ping", event_id=f"e{n}", received_at=now)
    return instance


def test_timeline_costs_the_same_queries_for_a_short_and_a_long_history(api):
    workflow = WorkflowFactory()
    short = _with_history(workflow, "short", 1)
    long = _with_history(workflow, "long", 60)
    api.get(URL.format(short.pk))  # warm the API-key cache and its last-used write

    with CaptureQueriesContext(connection) as short_queries:
        short_body = api.get(URL.format(short.pk)).json()
    with CaptureQueriesContext(connection) as long_queries:
        long_body = api.get(URL.format(long.pk)).json()

    assert len(short_body["steps"]) == 1 and len(long_body["steps"]) == 60
    assert len(long_body["history"]) == 121 and len(long_body["inbox"]) == 60
    assert len(long_queries) == len(short_queries) == 4, [
        q["sql"] for q in long_queries.captured_queries
    ]


def test_the_timeline_is_in_the_openapi_schema(client):
    schema = client.get("/api/schema/").content.decode()
    assert "/api/v1/triggers/{id}/timeline/" in schema
    assert "waiting_for" in schema and "consumed_by_node" in schema
    assert TriggerStatus.CANCELLED in schema
