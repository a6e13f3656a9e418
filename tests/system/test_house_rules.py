"""The house rules of the layers issue, each as behaviour: races end in 4xx, a KeyError
from inside a node is not "node missing", settings refuse typos, caches have one reset,
API keys record their use."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from executions import engine
from executions.nodes import EXECUTORS
from executions.outcomes import StepOutcome
from notifyflow import caching
from notifyflow.errors import ConflictError
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from triggers.models import ApiKey, TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import instance_run_now, trigger_create, workflows_by_key
from workflows.services import workflow_save

pytestmark = pytest.mark.both_databases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_workflow_posts_with_one_key_give_one_201(live_server):
    from triggers.services import api_key_create

    raw = api_key_create(name="race")[1]
    body = {"key": "raced", "name": "Raced", "definition": email_sms_definition()}
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    codes: list[str] = []
    lock = threading.Lock()

    def fire() -> None:
        session = requests.Session()
        session.get(f"{live_server.url}/healthz", timeout=30)
        barrier.wait()
        response = session.post(
            f"{live_server.url}/api/v1/workflows/",
            json=body,
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        )
        with lock:
            statuses.append(response.status_code)
            if response.status_code != 201:
                codes.append(response.json()["code"])

    threads = [threading.Thread(target=fire) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] + [409] * 19, statuses
    assert set(codes) == {"duplicate_key"}


@pytest.mark.django_db
def test_a_keyerror_inside_a_node_is_a_transient_failure_not_a_missing_node(
    monkeypatch, dispatched
):
    def broken(step):
        raise KeyError("provider_field")

    monkeypatch.setitem(EXECUTORS, "email", broken)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED and instance.attempts == 1
    assert "not in version" not in instance.last_error


@pytest.mark.django_db
def test_a_node_missing_from_the_version_fails_permanently(dispatched):
    instance = TriggerInstanceFactory(workflow=WorkflowFactory(), current_node_id="ghost")
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "'ghost' is not in version" in instance.last_error


@pytest.mark.django_db
def test_run_now_is_audited_through_the_transition_table(dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(), available_at=timezone.now() + timedelta(hours=1)
    )
    assert instance_run_now(instance_id=instance.pk, actor="bob")
    change = TriggerStatusChange.objects.get(instance=instance, actor="bob")
    assert (change.from_status, change.to_status) == ("enqueued", "enqueued")
    with pytest.raises(ConflictError, match="already due"):
        instance_run_now(instance_id=instance.pk, actor="bob")


@pytest.mark.parametrize(
    "env",
    [
        {"NOTIFYFLOW_KOMBU_TIMER_FIX": "ture"},
        {"NOTIFYFLOW_LEASE_S": "ninety"},
        {"NOTIFYFLOW_LEASE_S": "20"},  # below the hard time limit
    ],
)
def test_bad_settings_refuse_to_start_even_under_python_O(env):
    code = "import django; from django.conf import settings; settings.NOTIFYFLOW_LEASE_S"
    result = subprocess.run(
        [sys.executable, "-O", "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "notifyflow.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert next(iter(env)) in result.stderr


@pytest.mark.django_db
def test_saving_a_workflow_drops_the_process_cache_and_clear_all_empties_every_cache():
    workflow = WorkflowFactory()
    trigger_create(workflow=workflow.key, idempotency_key="k1", payload=PAYLOAD)
    assert workflows_by_key.get(workflow.key) is not None
    workflow_save(key=workflow.key, name="renamed", definition=email_sms_definition())
    assert workflows_by_key.get(workflow.key) is None
    workflows_by_key.put("x", workflow)
    caching.clear_all()
    assert workflows_by_key.get("x") is None


@pytest.mark.django_db
def test_api_key_last_used_at_is_written_at_most_once_a_minute(api, workflow):
    key = ApiKey.objects.get()
    assert key.last_used_at is None
    api.get("/api/v1/workflows/")
    key.refresh_from_db()
    first = key.last_used_at
    assert first is not None
    api.get("/api/v1/workflows/")
    key.refresh_from_db()
    assert key.last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    caching.clear_all()
    api.get("/api/v1/workflows/")
    key.refresh_from_db()
    assert key.last_used_at > first


@pytest.mark.django_db
def test_the_trigger_input_serializer_is_the_schema_and_the_validation(api, workflow):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    body = schema["components"]["schemas"]["TriggerCreateInput"]
    assert set(body["required"]) == {"workflow", "idempotency_key"}
    assert body["properties"]["idempotency_key"]["maxLength"] == 255
    response = api.post(
        "/api/v1/triggers/",
        {"workflow": workflow.key, "idempotency_key": "k" * 256, "payload": {}},
        format="json",
    )
    assert response.status_code == 400 and response.json()["code"] == "too_long"
    assert not TriggerInstance.objects.exists()
