"""The wait node parks an instance until its event arrives or its timeout: run-now (API
and admin, one service) ends the wait along its timed-out path, or takes an event
already delivered; a wait is one logical step in the console and the stats (its parking
row is marked, not an attempt). Engine-level: runs on SQLite and PostgreSQL (marker
both_databases)."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from executions import engine
from executions.outcomes import StepOutcome
from tests.admin_helpers import PASSWORD, make_operator
from tests.factories import PAYLOAD, WorkflowFactory, wait_definition
from triggers import inbox
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import instance_run_now, trigger_create

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _create(wf, key="k"):
    return trigger_create(workflow=wf, idempotency_key=key, payload=dict(PAYLOAD)).instance


def _fresh(instance) -> TriggerInstance:
    return TriggerInstance.objects.get(pk=instance.pk)


def _time_passes(instance) -> None:
    """The parked node's time has come (its message arrives at the deadline)."""
    now = timezone.now()
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=now, wait_deadline=now)


def _last_reason(instance) -> str:
    return TriggerStatusChange.objects.filter(instance=instance).latest("id").reason


# --- run-now on a wait ----------------------------------------------------------------------


def _parked_wait(wf=None) -> TriggerInstance:
    instance = _create(wf or WorkflowFactory(definition=wait_definition(timeout="2h")))
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    return instance


def test_run_now_over_the_api_ends_a_wait_along_its_timed_out_path(api, dispatched):
    instance = _parked_wait()
    dispatched.clear()
    response = api.post(f"/api/v1/triggers/{instance.pk}/run-now/")
    assert response.status_code == 200, response.json()
    assert [sent[0] for sent in dispatched] == [str(instance.pk)]
    reason = _last_reason(instance)
    assert "wait for event 'reply' at node listen skipped" in reason
    assert "delay" not in reason
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    moved = _fresh(instance)
    assert moved.vars["wait_listen"] == {"received": False, "event": None}
    assert moved.current_node_id == "nudge" and moved.waiting_for_event is None
    # It waits no more: a second run-now has nothing to skip.
    assert api.post(f"/api/v1/triggers/{instance.pk}/run-now/").status_code == 409


def test_run_now_on_a_wait_with_a_matching_event_already_delivered_takes_the_event(
    dispatched,
):
    instance = _parked_wait()
    # Its wake runs after commit, which this test's transaction never reaches: as if
    # the wake were lost, the instance is still parked with the event in its inbox.
    inbox.deliver(name="reply", event_id="r1", context={}, subjects=[f"instance:{instance.pk}"])
    assert _fresh(instance).available_at > timezone.now()
    assert instance_run_now(instance_id=instance.pk, actor="olive")
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert _fresh(instance).vars["wait_listen"]["received"] is True


def test_the_admin_run_now_button_ends_a_wait(dispatched, client):
    instance = _parked_wait()
    operator = make_operator()
    assert client.login(request=HttpRequest(), username=operator.username, password=PASSWORD)
    url = reverse("admin:triggers_triggerinstance_run_now", args=[instance.pk])
    client.post(url)
    change = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert change.actor == operator.username and "wait for event 'reply'" in change.reason
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert _fresh(instance).current_node_id == "nudge"


# --- one logical step ----------------------------------------------------------------------


def test_a_wait_is_one_step_in_the_stats_the_step_logs_and_the_console(
    api, dispatched, client, django_capture_on_commit_callbacks
):
    wf = WorkflowFactory(definition=wait_definition(timeout="2h"))
    instance = _parked_wait(wf)
    with django_capture_on_commit_callbacks(execute=True):  # the wake runs after commit
        inbox.deliver(name="reply", event_id="r", context={}, subjects=[f"instance:{instance.pk}"])
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED

    stats = api.get(f"/api/v1/workflows/{wf.key}/stats/").json()
    listen = next(n for n in stats["nodes"] if n["node_id"] == "listen")
    assert listen == {"node_id": "listen", "executions": 1, "successes": 1, "failures": 0}

    steps = api.get(f"/api/v1/triggers/{instance.pk}/timeline/").json()["steps"]
    assert [(s["node_id"], s["parked"]) for s in steps] == [("listen", True), ("listen", False)]

    operator = make_operator()
    assert client.login(request=HttpRequest(), username=operator.username, password=PASSWORD)
    page = client.get(
        reverse("admin:triggers_triggerinstance_change", args=[instance.pk])
    ).content.decode()
    assert "parked (not an attempt)" in page
    assert "retry budget" not in page
    logs = client.get(reverse("admin:executions_stepexecutionlog_changelist")).content.decode()
    assert "parked (not an attempt)" in logs and "retry budget" not in logs
