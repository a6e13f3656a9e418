"""Structured logs (issue 11): JSON lines or plain text by NOTIFYFLOW_LOG_FORMAT, a
request id the API returns and passes into the tasks it causes, and step lines that
carry trigger_id, workflow, node_id, attempt and task_id."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from executions import engine
from notifyflow import logs
from tests.factories import PAYLOAD, WorkflowFactory
from tests.worker import ROOT, celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus

LOG_ONE_LINE = (
    "import django, logging; django.setup(); from notifyflow import logs\n"
    "with logs.bound(request_id='r-1', trigger_id='t-1'):\n"
    "    logging.getLogger('notifyflow.engine').warning('hello %s', 'world')\n"
)


def _run(fmt: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LOG_ONE_LINE],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "notifyflow.settings",
            "NOTIFYFLOW_LOG_FORMAT": fmt,
        },
        capture_output=True,
        text=True,
    )


def test_json_format_writes_one_object_per_line_with_the_context():
    result = _run("json")
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.strip().splitlines()
    record = json.loads(line)
    assert record["message"] == "hello world" and record["level"] == "WARNING"
    assert record["logger"] == "notifyflow.engine"
    assert (record["request_id"], record["trigger_id"]) == ("r-1", "t-1")
    assert record["ts"].endswith("+00:00")


def test_plain_format_is_the_default_and_readable():
    result = _run("")
    assert result.returncode == 0, result.stderr
    line = result.stderr.strip()
    assert "WARNING notifyflow.engine hello world [request_id=r-1 trigger_id=t-1]" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_an_unknown_log_format_refuses_to_start():
    result = _run("xml")
    assert result.returncode != 0 and "NOTIFYFLOW_LOG_FORMAT" in result.stderr


@pytest.mark.django_db
def test_the_api_returns_a_request_id_and_keeps_a_sane_one_from_the_client(api):
    generated = api.get("/api/v1/workflows/")
    assert len(generated["X-Request-ID"]) == 32
    assert api.get("/api/v1/workflows/", HTTP_X_REQUEST_ID="abc-123")["X-Request-ID"] == "abc-123"
    hostile = api.get("/api/v1/workflows/", HTTP_X_REQUEST_ID='x" injected="1\n')
    assert hostile["X-Request-ID"] != 'x" injected="1\n' and len(hostile["X-Request-ID"]) == 32


@pytest.mark.django_db
def test_a_step_logs_one_line_with_trigger_workflow_node_attempt_and_task(dispatched, caplog):
    records: list[dict] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append({"message": record.getMessage(), **logs.current()})

    handler = Capture()
    logging.getLogger("notifyflow.engine").addHandler(handler)
    try:
        wf = WorkflowFactory()
        from triggers.services import trigger_create

        instance = trigger_create(workflow=wf, idempotency_key="l", payload=PAYLOAD).instance
        with logs.bound(request_id="req-9"):
            engine.step_execute(instance_id=instance.pk, task_id="task-7")
    finally:
        logging.getLogger("notifyflow.engine").removeHandler(handler)
    [line] = [r for r in records if r["message"] == "step advanced"]
    assert line == {
        "message": "step advanced",
        "request_id": "req-9",
        "task_id": "task-7",
        "trigger_id": str(instance.pk),
        "workflow": wf.key,
        "node_id": "hello",
        "attempt": 1,
    }
    assert logs.current() == {}  # nothing leaks out of the step


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_every_step_line_in_the_worker_carries_the_request_id_of_the_post(api, tmp_path):
    flush_broker()
    workflow = WorkflowFactory()
    with celery_worker(tmp_path, NOTIFYFLOW_LOG_FORMAT="json"):
        response = api.post(
            "/api/v1/triggers/",
            {"workflow": workflow.key, "idempotency_key": "rid", "payload": PAYLOAD},
            format="json",
            HTTP_X_REQUEST_ID="req-from-post-42",
        )
        assert response["X-Request-ID"] == "req-from-post-42"
        instance_id = response.json()["id"]
        wait_until(
            lambda: TriggerInstance.objects.filter(
                pk=instance_id, status=TriggerStatus.COMPLETED
            ).exists(),
            timeout=180,
            what="instance to complete",
        )
    lines = []
    for raw in (tmp_path / "worker-w1.log").read_text().splitlines():
        if raw.startswith("{"):
            record = json.loads(raw)
            if record.get("trigger_id") == instance_id:
                lines.append(record)
    steps = [r for r in lines if r["message"].startswith("step ")]
    assert [(r["node_id"], r["message"]) for r in steps] == [
        ("hello", "step advanced"),
        ("text", "step completed"),
    ]
    for record in steps:
        assert record["request_id"] == "req-from-post-42", record
        assert record["task_id"] and record["workflow"] == workflow.key
        assert record["attempt"] == 1
    assert steps[0]["task_id"] != steps[1]["task_id"]
