"""The emit node: it raises an event once the step is recorded - bound workflows start,
waiting instances with an equal interest (the emitter too) receive it - written to the
outbox once per (instance, node), so a redelivered step never emits twice; its output
is in ``vars.emit_<node id>``; a template error or an empty event name fails the step
for good. Engine-level: runs on SQLite and PostgreSQL (marker both_databases)."""

from __future__ import annotations

import pytest

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import PAYLOAD, WorkflowFactory, WorkflowTriggerFactory
from triggers import outbox
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.inbox import OutboxEvent
from triggers.services import trigger_create

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def created(wf, key="k"):
    return trigger_create(workflow=wf, idempotency_key=key, payload=dict(PAYLOAD)).instance


def emit_then_wait() -> dict:
    return {
        "entry_node_id": "shout",
        "nodes": [
            {
                "id": "shout",
                "type": "emit",
                "config": {
                    "event": "welcome.sent",
                    "subjects": ["instance:{{ trigger.id }}"],
                    "context": {"who": "{{ payload.name }}"},
                },
            },
            {"id": "hear", "type": "wait", "config": {"event": "welcome.sent", "timeout": "1h"}},
        ],
        "edges": [{"from": "shout", "to": "hear"}],
    }


def test_an_emitted_event_starts_bound_workflows_once_and_wakes_the_emitter(dispatched):
    emitter = WorkflowFactory(definition=emit_then_wait())
    follower = WorkflowFactory()
    WorkflowTriggerFactory(event_name="welcome.sent", workflow=follower)
    instance = created(emitter)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    row = OutboxEvent.objects.get(instance=instance)
    assert row.processed_at is not None and row.event_id == f"{instance.pk}:shout"
    assert row.context == {"who": "Ada"}
    assert TriggerInstance.objects.filter(workflow=follower).count() == 1
    assert TriggerInstance.objects.get(pk=instance.pk).vars["emit_shout"] == {
        "name": "welcome.sent",
        "event_id": f"{instance.pk}:shout",
        "subjects": [f"instance:{instance.pk}"],
    }
    # processing it again (a redelivery, the sweeper) starts nothing more
    assert not outbox.outbox_process(instance_id=instance.pk, node_id="shout")
    assert TriggerInstance.objects.filter(workflow=follower).count() == 1
    # the emitter heard its own event, delivered before its wait was reached
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    assert TriggerInstance.objects.get(pk=instance.pk).vars["wait_hear"]["received"] is True


def test_a_redelivered_emit_step_never_emits_twice(dispatched):
    follower = WorkflowFactory()
    WorkflowTriggerFactory(event_name="welcome.sent", workflow=follower)  # UUID keys
    instance = created(WorkflowFactory(definition=emit_then_wait()))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    # the same step runs again (a redelivered message after a lost outcome, an operator
    # rewinding it): the outbox row is once per (instance, node)
    TriggerInstance.objects.filter(pk=instance.pk).update(current_node_id="shout")
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert OutboxEvent.objects.filter(instance=instance).count() == 1
    assert TriggerInstance.objects.filter(workflow=follower).count() == 1


def emit_only(**config) -> dict:
    return {
        "entry_node_id": "shout",
        "nodes": [{"id": "shout", "type": "emit", "config": config}],
        "edges": [],
    }


def test_without_a_context_the_event_carries_the_payload_and_takes_the_event_id_given(
    dispatched,
):
    wf = WorkflowFactory(definition=emit_only(event="hi", event_id="hi-{{ payload.name }}"))
    instance = created(wf)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    row = OutboxEvent.objects.get(instance=instance)
    assert (row.name, row.event_id, row.context, row.subjects) == ("hi", "hi-Ada", PAYLOAD, [])


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"event": "{{ payload.missing }}"}, "event: template error"),
        ({"event": "{{ payload.name | remove: 'Ada' }}"}, "event: renders to nothing"),
        ({"event": "hi", "context": {"who": ["{{ payload.missing }}"]}}, "context.who[0]"),
    ],
)
def test_an_event_that_cannot_be_rendered_fails_the_step_for_good(dispatched, config, error):
    instance = created(WorkflowFactory(definition=emit_only(**config)))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    failed = TriggerInstance.objects.get(pk=instance.pk)
    assert failed.status == TriggerStatus.FAILED and error in failed.last_error
    assert not OutboxEvent.objects.exists()
