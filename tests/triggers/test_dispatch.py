"""Priority lanes: every path that creates or re-sends an instance's step message
puts it on that instance's own lane's queue - the lane set when it was created (the
workflow's priority; bulk for a normal workflow's list fan-out)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory
from triggers import inbox, services
from triggers.dispatch import LANE_QUEUES, lane_queue
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus
from triggers.services import RecipientEntry, TriggerItem, trigger_create_for_recipients
from triggers.state import parking
from workflows.models import Priority

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
PRIORITIES = ["critical", "high", "normal", "bulk"]
QUEUE = {
    "critical": "notifyflow.critical",
    "high": "notifyflow.high",
    "normal": "notifyflow.default",
    "bulk": "notifyflow.bulk",
}


def test_each_lane_has_its_queue_listed_in_the_settings_most_urgent_first(settings):
    assert {lane: lane_queue(lane) for lane in PRIORITIES} == QUEUE
    assert list(LANE_QUEUES) == list(Priority)
    names = [queue.name for queue in settings.CELERY_TASK_QUEUES]
    assert names[:4] == list(QUEUE.values())
    assert settings.CELERY_TASK_DEFAULT_QUEUE == "notifyflow.default"
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("queue_order_strategy") in (
        "priority",
        None,  # not Redis
    )


@pytest.mark.parametrize("priority", PRIORITIES)
def test_a_trigger_runs_in_its_workflows_lane(dispatched, priority):
    workflow = WorkflowFactory(priority=priority)
    made = services.trigger_create(workflow=workflow, idempotency_key="k", payload=PAYLOAD)
    assert made.instance.lane == priority
    assert TriggerInstance.objects.get(pk=made.instance.pk).lane == priority
    assert dispatched.queues == {str(made.instance.pk): QUEUE[priority]}


def test_a_bulk_request_sends_each_item_to_its_own_workflows_lane(dispatched):
    for priority in PRIORITIES:
        WorkflowFactory(key=f"wf-{priority}", priority=priority)
    outcomes = services.trigger_create_bulk(
        items=[
            TriggerItem(workflow=f"wf-{priority}", idempotency_key=f"k{n}", payload=PAYLOAD)
            for n, priority in enumerate(["bulk", "critical", "normal", "high", "critical"])
        ]
    )
    lanes = dict(TriggerInstance.objects.values_list("id", "lane"))
    assert len(lanes) == 5
    assert dispatched.queues == {str(pk): QUEUE[lane] for pk, lane in lanes.items()}
    assert {o.instance_id for o in outcomes} == set(lanes)
    # The most urgent lane's messages are published first.
    order = [lanes[TriggerInstance.objects.get(pk=i).pk] for i, _ in dispatched]
    assert order == sorted(order, key=PRIORITIES.index)
    assert order[0] == "critical" and order[-1] == "bulk"


def test_named_recipients_run_in_the_workflows_lane(dispatched):
    WorkflowFactory(key="reset", priority="critical")
    result = trigger_create_for_recipients(
        workflow="reset",
        idempotency_key="k",
        payload=PAYLOAD,
        recipients=[RecipientEntry(id="r1"), RecipientEntry(id="r2")],
    )
    ids = [str(i.id) for i in result.instances]
    assert set(TriggerInstance.objects.values_list("lane", flat=True)) == {"critical"}
    assert dispatched.queues == dict.fromkeys(ids, "notifyflow.critical")


def _parked(workflow, **fields):
    return TriggerInstanceFactory(
        workflow=workflow, available_at=timezone.now() + timedelta(hours=1), **fields
    )


def test_woken_waits_and_gates_go_to_each_instances_lane(dispatched):
    high, bulk = WorkflowFactory(priority="high"), WorkflowFactory(priority="bulk")
    waiting = [_parked(wf, waiting_for_event="paid") for wf in (high, bulk)]
    assert inbox.wake_waiting(instance_ids=[i.pk for i in waiting], event="paid") == 2
    gated = [_parked(wf, parked_on=ParkedOn.BATCH) for wf in (bulk, high)]
    assert parking.wake_parked(instance_ids=[i.pk for i in gated], parked_on=ParkedOn.BATCH) == 2
    assert dispatched.queues == {str(i.pk): QUEUE[i.lane] for i in [*waiting, *gated]}


def test_operator_retry_run_now_and_resume_send_to_the_instances_lane(dispatched):
    workflow = WorkflowFactory(priority="critical")
    failed = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.FAILED)
    services.instance_retry(instance_id=failed.pk, actor="op")
    edited = TriggerInstanceFactory(workflow=workflow, status=TriggerStatus.FAILED)
    services.instance_edit_payload_and_retry(instance_id=edited.pk, actor="op", payload={})
    later = _parked(workflow)
    services.instance_run_now(instance_id=later.pk, actor="op")
    paused = WorkflowFactory(priority="high")
    services.workflow_pause(workflow=paused, actor="op")
    due = TriggerInstanceFactory(workflow=paused)
    services.workflow_resume(workflow=paused, actor="op")
    assert dispatched.routes[-1] == (str(due.pk), "notifyflow.high")
    assert dispatched.routes[:3] == [
        (str(i.pk), "notifyflow.critical") for i in (failed, edited, later)
    ]


def test_an_instance_keeps_its_lane_when_its_workflow_changes_priority(dispatched):
    workflow = WorkflowFactory(priority="bulk")
    before = services.trigger_create(workflow=workflow, idempotency_key="a", payload=PAYLOAD)
    workflow.priority = "critical"
    workflow.save()
    after = services.trigger_create(workflow=workflow, idempotency_key="b", payload=PAYLOAD)
    TriggerInstance.objects.filter(pk=before.instance.pk).update(status=TriggerStatus.FAILED)
    services.instance_retry(instance_id=before.instance.pk, actor="op")
    assert dispatched.queues == {
        str(before.instance.pk): "notifyflow.bulk",
        str(after.instance.pk): "notifyflow.critical",
    }


def test_an_unknown_lane_is_refused():
    with pytest.raises(ValueError, match="unknown lane 'urgent'"):
        lane_queue("urgent")
