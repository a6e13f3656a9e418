"""Running instances: interests, inbox delivery, the wait node, cancel_on (the emit node
and its outbox: tests/executions/nodes/test_emit.py, tests/triggers/test_outbox.py).
Engine-level tests run on SQLite and PostgreSQL (marker both_databases); the end-to-end
ones need a real worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import (
    PAYLOAD,
    TriggerInstanceFactory,
    WorkflowFactory,
    wait_definition,
)
from triggers import inbox
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import InboxEvent, Interest
from triggers.services import trigger_create
from workflows.definition import DefinitionError, validate_definition

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _create(wf, key="k", payload=None):
    return trigger_create(
        workflow=wf, idempotency_key=key, payload=payload or dict(PAYLOAD)
    ).instance


def _status(instance) -> str:
    return TriggerInstance.objects.get(pk=instance.pk).status


# --- definitions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "node"),
    [
        (lambda d: d["nodes"][0]["config"].pop("event"), "nodes[0].config.event", "listen"),
        (
            lambda d: d["nodes"][0]["config"].update(timeout="soon"),
            "nodes[0].config.timeout",
            "listen",
        ),
        (
            lambda d: d["nodes"][0]["config"].pop("timeout"),
            "nodes[0].config.timeout",
            "listen",
        ),
        (
            lambda d: d["nodes"].append({"id": "shout", "type": "emit", "config": {}}),
            "nodes[3].config.event",
            "shout",
        ),
        (lambda d: d.update(interests=["order:{{ payload.id"]), "interests[0]", None),
        (lambda d: d.update(cancel_on=[{"match": "true"}]), "cancel_on[0].event", None),
        (
            lambda d: d["nodes"][0]["config"].update(match="event.context.x =="),
            "nodes[0].config.match",
            "listen",
        ),
    ],
)
def test_every_new_definition_error_names_node_and_field(change, field, node):
    definition = wait_definition()
    change(definition)
    with pytest.raises(DefinitionError) as info:
        validate_definition(definition)
    assert (field, node) in [(p.field, p.node) for p in info.value.errors]


# --- interests and delivery -------------------------------------------------------------


def test_interests_are_rendered_and_stored_with_the_instance(dispatched):
    wf = WorkflowFactory(definition=wait_definition(interests=["user:{{ payload.email }}"]))
    instance = _create(wf)
    assert list(Interest.objects.filter(instance=instance).values_list("subject", flat=True)) == [
        "user:ada@example.com"
    ]


def test_an_interest_that_does_not_render_is_a_400_naming_it_and_stores_nothing(api):
    wf = WorkflowFactory(definition=wait_definition(interests=["order:{{ payload.order_id }}"]))
    response = api.post(
        "/api/v1/triggers/",
        {"workflow": wf.key, "idempotency_key": "x", "payload": PAYLOAD},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "payload"
    assert response.json()["code"] == "invalid_interest"
    assert "order:{{ payload.order_id }}" in response.json()["message"]
    assert not TriggerInstance.objects.exists() and not Interest.objects.exists()


def test_events_reach_every_unfinished_interested_instance_once_per_event_id(api, dispatched):
    wf = WorkflowFactory(definition=wait_definition(interests=["order:{{ payload.order }}"]))
    first = _create(wf, "a", {**PAYLOAD, "order": 7})
    second = _create(wf, "b", {**PAYLOAD, "order": 7})
    other = _create(wf, "c", {**PAYLOAD, "order": 8})
    done = _create(wf, "d", {**PAYLOAD, "order": 7})
    TriggerInstance.objects.filter(pk=done.pk).update(status=S.COMPLETED, current_node_id=None)
    body = {"name": "shipped", "event_id": "e1", "context": {"n": 1}, "subjects": ["order:7"]}
    response = api.post("/api/v1/events/", body, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["delivered"] == 2
    assert set(response.json()["instances"]) == {str(first.pk), str(second.pk)}
    again = api.post("/api/v1/events/", body, format="json")
    assert again.json()["delivered"] == 0
    assert InboxEvent.objects.filter(instance=first).count() == 1
    assert not InboxEvent.objects.filter(instance__in=[other, done]).exists()


def test_an_event_for_one_instance(api, dispatched):
    wf = WorkflowFactory(definition=wait_definition())
    instance = _create(wf)
    url = f"/api/v1/triggers/{instance.pk}/events/"
    response = api.post(url, {"name": "reply", "context": {"text": "yes"}}, format="json")
    assert response.status_code == 202 and response.json() == {"delivered": 1}
    assert api.post(url, {"context": {}}, format="json").json()["field"] == "name"
    TriggerInstance.objects.filter(pk=instance.pk).update(status=S.COMPLETED)
    finished = api.post(url, {"name": "reply"}, format="json")
    assert finished.status_code == 409 and finished.json()["code"] == "already_finished"
    unknown = api.post(
        "/api/v1/triggers/00000000-0000-0000-0000-000000000000/events/",
        {"name": "reply"},
        format="json",
    )
    assert unknown.status_code == 404


def test_subjects_are_validated(api):
    too_many = {"name": "E", "subjects": [f"s{i}" for i in range(101)]}
    assert api.post("/api/v1/events/", too_many, format="json").json()["field"] == "subjects"
    not_strings = {"name": "E", "subjects": [1]}
    response = api.post("/api/v1/events/", not_strings, format="json")
    assert response.status_code == 400 and response.json()["field"].startswith("subjects")


# --- the wait node ---------------------------------------------------------------------------


def test_an_event_delivered_before_the_wait_is_reached_is_consumed_by_it(dispatched):
    wf = WorkflowFactory(definition=wait_definition(match='event.context.answer == "yes"'))
    instance = _create(wf)
    inbox.deliver(
        name="reply",
        event_id="no-1",
        context={"answer": "no"},
        subjects=[f"instance:{instance.pk}"],
    )
    inbox.deliver(
        name="reply",
        event_id="yes-1",
        context={"answer": "yes"},
        subjects=[f"instance:{instance.pk}"],
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.current_node_id == "thanks"
    assert instance.vars["wait_listen"]["received"] is True
    assert instance.vars["wait_listen"]["event"]["event_id"] == "yes-1"
    consumed = dict(InboxEvent.objects.values_list("event_id", "consumed_by_node"))
    assert consumed == {"no-1": "", "yes-1": "listen"}  # the non-matching one stays


def test_a_wait_parks_without_a_worker_and_a_delivery_wakes_it_at_once(
    dispatched, django_capture_on_commit_callbacks
):
    wf = WorkflowFactory(definition=wait_definition(timeout="2h"))
    instance = _create(wf)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    parked = TriggerInstance.objects.get(pk=instance.pk)
    assert parked.status == S.ENQUEUED and parked.waiting_for_event == "reply"
    assert parked.available_at > timezone.now() + timedelta(minutes=100)
    assert parked.dispatched_at is None  # beyond the broker horizon: the sweeper's
    dispatched.clear()
    with django_capture_on_commit_callbacks(execute=True):  # the wake runs after commit
        inbox.deliver(name="reply", event_id="r", context={}, subjects=[f"instance:{instance.pk}"])
    assert [sent[0] for sent in dispatched] == [str(instance.pk)]
    assert TriggerInstance.objects.get(pk=instance.pk).available_at <= timezone.now()
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert TriggerInstance.objects.get(pk=instance.pk).vars["wait_listen"]["received"]


def test_a_wait_times_out_at_its_deadline_and_takes_the_other_branch(dispatched):
    wf = WorkflowFactory(definition=wait_definition(timeout="1s"))
    instance = _create(wf)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    # the step runs at (or after) the deadline
    TriggerInstance.objects.filter(pk=instance.pk).update(
        wait_deadline=timezone.now(), available_at=timezone.now()
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.vars["wait_listen"] == {"received": False, "event": None}
    assert instance.current_node_id == "nudge" and instance.waiting_for_event is None
    # an event arriving after the timeout is not consumed: exactly one outcome
    inbox.deliver(name="reply", event_id="late", context={}, subjects=[f"instance:{instance.pk}"])
    assert InboxEvent.objects.get(event_id="late").consumed_at is None


def test_an_event_arriving_as_the_deadline_passes_is_received_not_timed_out(dispatched):
    wf = WorkflowFactory(definition=wait_definition(timeout="1s"))
    instance = _create(wf)
    engine.step_execute(instance_id=instance.pk)
    TriggerInstance.objects.filter(pk=instance.pk).update(
        wait_deadline=timezone.now(), available_at=timezone.now()
    )
    inbox.deliver(name="reply", event_id="just", context={}, subjects=[f"instance:{instance.pk}"])
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.vars["wait_listen"]["received"] is True  # never both, never neither
    assert InboxEvent.objects.get(event_id="just").consumed_by_node == "listen"


def test_an_event_landing_while_the_wait_parks_is_not_missed(monkeypatch, dispatched):
    """The window between the wait's look at the inbox and its park commit."""
    wf = WorkflowFactory(definition=wait_definition(timeout="2h"))
    instance = _create(wf)
    real_pending = inbox.pending_events

    def deliver_right_after_the_look(*, instance_id, name):
        seen = real_pending(instance_id=instance_id, name=name)
        inbox.deliver(
            name="reply", event_id="race", context={}, subjects=[f"instance:{instance_id}"]
        )
        return seen

    monkeypatch.setattr("executions.nodes.wait.pending_events", deliver_right_after_the_look)
    dispatched.clear()
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    assert TriggerInstance.objects.get(pk=instance.pk).available_at <= timezone.now()
    assert str(instance.pk) in [sent[0] for sent in dispatched]


# --- cancel_on ---------------------------------------------------------------------------------


def test_cancel_on_a_matching_event_cancels_and_names_the_event(dispatched):
    wf = WorkflowFactory(
        definition=wait_definition(
            interests=["order:{{ payload.order }}"],
            cancel_on=[{"event": "order.cancelled", "match": "event.context.full == true"}],
        )
    )
    instance = _create(wf, payload={**PAYLOAD, "order": 1})
    inbox.deliver(
        name="order.cancelled", event_id="p", context={"full": False}, subjects=["order:1"]
    )
    assert _status(instance) == S.ENQUEUED
    inbox.deliver(
        name="order.cancelled", event_id="f", context={"full": True}, subjects=["order:1"]
    )
    assert _status(instance) == S.CANCELLED
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert change.actor == "event:order.cancelled" and "'order.cancelled' (f)" in change.reason


def test_cancel_on_wins_over_a_wait_on_the_same_event(dispatched):
    wf = WorkflowFactory(definition=wait_definition(event="stop", cancel_on=[{"event": "stop"}]))
    instance = _create(wf)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    inbox.deliver(name="stop", event_id="s", context={}, subjects=[f"instance:{instance.pk}"])
    assert _status(instance) == S.CANCELLED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.SKIPPED_CANCELLED
    assert InboxEvent.objects.get(event_id="s").consumed_at is None


def test_a_delivery_to_many_waiting_instances_wakes_them_from_worker_tasks(
    monkeypatch, dispatched, django_capture_on_commit_callbacks
):
    """Publishing one message per instance inline would hold the request for long
    (10,000 took most of a minute): past WAKE_INLINE_MAX the wake goes to tasks."""
    from executions.tasks import wake_waiting

    wf = WorkflowFactory(definition=wait_definition(timeout="2h"))
    later = timezone.now() + timedelta(hours=2)
    instances = [
        TriggerInstanceFactory(
            workflow=wf,
            current_node_id="listen",
            waiting_for_event="reply",
            wait_deadline=later,
            available_at=later,
        )
        for _ in range(inbox.WAKE_INLINE_MAX + 5)
    ]
    for instance in instances:
        Interest.objects.create(instance=instance, subject="campaign:1")
    wake_tasks = []
    monkeypatch.setattr(
        "triggers.inbox.send_tasks_on_commit",
        lambda name, args_list: wake_tasks.extend((name, args) for args in args_list),
    )
    dispatched.clear()
    with django_capture_on_commit_callbacks(execute=True):
        delivered = inbox.deliver(name="reply", event_id="go", context={}, subjects=["campaign:1"])
    assert delivered.count == len(instances)
    assert dispatched == []  # nothing published per instance in the request
    assert [(name, len(args[0]), args[1]) for name, args in wake_tasks] == [
        ("notifyflow.wake_waiting", len(instances), "reply")
    ]
    assert wake_waiting(*wake_tasks[0][1]) == len(instances)
    assert len(dispatched) == len(instances)
    assert not TriggerInstance.objects.filter(available_at__gt=timezone.now()).exists()
