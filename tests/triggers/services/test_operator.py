"""The operator's services: cancellation (by id, by key, admin; racing a running step),
pause/resume, run-now saying what it skipped, and the creation audit row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine, sweeper
from executions.models import Delivery, StepExecutionLog
from executions.outcomes import StepOutcome
from executions.providers import sms
from notifyflow.errors import ConflictError
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import celery_worker, flush_broker, sent_sms, wait_until
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import (
    instance_cancel,
    instance_run_now,
    trigger_create,
    workflow_pause,
    workflow_resume,
)
from workflows.definition import node_types

pytestmark = pytest.mark.both_databases

S = TriggerStatus
URL = "/api/v1/triggers/"


@pytest.mark.django_db
def test_creation_is_audited_as_none_to_enqueued(api, workflow, dispatched):
    created = api.post(
        URL, {"workflow": workflow.key, "idempotency_key": "a", "payload": PAYLOAD}, format="json"
    )
    change = TriggerStatusChange.objects.get(instance_id=created.json()["id"])
    assert (change.from_status, change.to_status, change.reason) == ("", "enqueued", "created")
    api.post(
        URL, {"workflow": workflow.key, "idempotency_key": "a", "payload": PAYLOAD}, format="json"
    )
    assert TriggerStatusChange.objects.count() == 1  # a replay creates nothing


@pytest.mark.django_db
def test_cancel_by_id_audits_the_callers_reason_and_refuses_a_second_time(
    api, workflow, dispatched
):
    instance = trigger_create(workflow=workflow, idempotency_key="c1", payload=PAYLOAD).instance
    response = api.post(f"{URL}{instance.pk}/cancel/", {"reason": "order shipped"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "cancelled" and body["finished_at"]
    assert body["cursor"] == {"current_node_id": None}
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert (change.from_status, change.to_status) == ("enqueued", "cancelled")
    assert change.reason == "order shipped" and change.actor == "api:tests"
    again = api.post(f"{URL}{instance.pk}/cancel/", {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "already_finished"
    assert "cancelled" in again.json()["message"]
    missing = api.post(f"{URL}00000000-0000-0000-0000-000000000000/cancel/", {}, format="json")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


@pytest.mark.django_db
def test_cancel_by_workflow_and_key(api, workflow, dispatched):
    instance = trigger_create(workflow=workflow, idempotency_key="order-7", payload=PAYLOAD)
    response = api.post(
        f"{URL}cancel/", {"workflow": workflow.key, "idempotency_key": "order-7"}, format="json"
    )
    assert response.status_code == 200 and response.json()["id"] == str(instance.instance.pk)
    unknown = api.post(
        f"{URL}cancel/", {"workflow": workflow.key, "idempotency_key": "nope"}, format="json"
    )
    assert unknown.status_code == 404 and unknown.json()["field"] == "idempotency_key"
    bad = api.post(f"{URL}cancel/", {"workflow": workflow.key}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "idempotency_key"


@pytest.mark.django_db
def test_a_cancelled_instances_pending_message_is_a_no_op(dispatched):
    wf = WorkflowFactory(definition=email_sms_definition(delay="1s"))
    instance = trigger_create(workflow=wf, idempotency_key="d", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED  # email
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED  # the delay
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.EARLY  # the SMS is not due
    instance_cancel(instance_id=instance.pk, actor="ops", reason="")
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.SKIPPED_CANCELLED
    assert sweeper.sweep(now=timezone.now() + timedelta(hours=1)) == {
        "recovered": 0,
        "dispatched": 0,
        "outbox": 0,
        "fanouts": 0,
        "webhooks": 0,
    }
    assert not sms.outbox


@pytest.mark.django_db
def test_cancel_racing_a_running_step_records_the_send_but_never_advances(monkeypatch, dispatched):
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="race", payload=PAYLOAD).instance
    send_email = node_types.get("email").run

    def cancelled_mid_step(step):
        output = send_email(step)  # the provider accepted the message...
        instance_cancel(instance_id=step.instance_id, actor="ops", reason="stop")  # ...then
        return output

    monkeypatch.setattr(node_types.get("email"), "run", cancelled_mid_step)
    dispatched.clear()
    engine.step_execute(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == S.CANCELLED
    assert Delivery.objects.get(instance=instance, node_id="hello").status == "sent"
    log = StepExecutionLog.objects.get(trigger=instance)
    assert log.success and log.error_kind == "cancelled"
    assert dispatched == []  # the next node was never scheduled
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.SKIPPED_CANCELLED


@pytest.mark.django_db
def test_a_paused_workflow_runs_no_step_until_resumed(dispatched):
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="p", payload=PAYLOAD).instance
    workflow_pause(workflow=wf, actor="ops")
    assert engine.step_execute(instance_id=instance.pk).startswith("skipped")
    assert TriggerInstance.objects.get(pk=instance.pk).status == S.ENQUEUED
    assert sweeper.sweep(now=timezone.now() + timedelta(hours=1))["dispatched"] == 0
    dispatched.clear()
    workflow_resume(workflow=wf, actor="ops")
    assert [sent[0] for sent in dispatched] == [str(instance.pk)]
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED


@pytest.mark.django_db
def test_pause_and_resume_over_the_api(api, workflow):
    paused = api.post(f"/api/v1/workflows/{workflow.key}/pause/")
    assert paused.status_code == 200 and paused.json()["is_paused"] is True
    resumed = api.post(f"/api/v1/workflows/{workflow.key}/resume/")
    assert resumed.status_code == 200 and resumed.json()["is_paused"] is False
    assert api.post("/api/v1/workflows/nope/pause/").status_code == 404


@pytest.mark.django_db
def test_admin_cancel_action_audits_the_operator(admin_client, workflow, dispatched):
    instance = trigger_create(workflow=workflow, idempotency_key="adm", payload=PAYLOAD).instance
    admin_client.post(
        "/admin/triggers/triggerinstance/",
        {"action": "cancel", "_selected_action": [str(instance.pk)]},
    )
    change = TriggerStatusChange.objects.filter(instance=instance).last()
    assert change.to_status == "cancelled" and change.actor == "admin"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_cancelled_during_a_delay_the_worker_never_sends_the_sms(tmp_path):
    flush_broker()
    wf = WorkflowFactory(definition=email_sms_definition(delay="3s"))
    with celery_worker(tmp_path):
        instance = trigger_create(workflow=wf, idempotency_key="w", payload=PAYLOAD).instance
        wait_until(
            lambda: TriggerInstance.objects.filter(
                pk=instance.pk, status=S.ENQUEUED, current_node_id="text"
            ).exists(),
            timeout=180,
            what="the delay to be scheduled",
        )
        instance_cancel(instance_id=instance.pk, actor="ops", reason="shipped")
        # Past the delay the broker message arrives and must do nothing.
        log_path = tmp_path / "worker-w1.log"
        wait_until(
            lambda: "skipped:cancelled" in log_path.read_text(),
            timeout=180,
            what="the delayed message to arrive and be skipped",
        )
        log = log_path.read_text()
    assert TriggerInstance.objects.get(pk=instance.pk).status == S.CANCELLED
    assert sent_sms(tmp_path) == {}
    assert "skipped:cancelled" in log


@pytest.mark.django_db
def test_run_now_says_what_it_skipped(dispatched):
    def created(wf, key):
        return trigger_create(workflow=wf, idempotency_key=key, payload=dict(PAYLOAD)).instance

    def last_reason(instance) -> str:
        return TriggerStatusChange.objects.filter(instance=instance).latest("id").reason

    later = timezone.now() + timedelta(hours=1)
    delayed = created(WorkflowFactory(definition=email_sms_definition(delay="1h")), "d")
    engine.step_execute(instance_id=delayed.pk)  # hello -> the delay -> due at text later
    engine.step_execute(instance_id=delayed.pk)
    assert instance_run_now(instance_id=delayed.pk, actor="olive")
    assert "delay before node text skipped" in last_reason(delayed)
    backing_off = created(WorkflowFactory(), "r")
    TriggerInstance.objects.filter(pk=backing_off.pk).update(attempts=2, available_at=later)
    assert instance_run_now(instance_id=backing_off.pk, actor="olive")
    assert "retry backoff of node hello skipped" in last_reason(backing_off)
    with pytest.raises(ConflictError, match="already due"):
        instance_run_now(instance_id=backing_off.pk, actor="olive")
