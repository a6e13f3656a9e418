"""What the worker's log says: a failed step at WARNING with its error, where it failed
and what happens next; the sweeper quiet unless it found work (Celery's own lines about
it at DEBUG). The last tests run a real worker with beat."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from celery.app import trace
from celery.worker import strategy
from django.utils import timezone

from executions import engine, tasks
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition, render_error_definition
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create
from workflows.definition import node_types

S = TriggerStatus


def _records(caplog, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


@pytest.mark.django_db
def test_a_failed_step_is_a_warning_with_its_error_node_and_instance(caplog, dispatched):
    wf = WorkflowFactory(definition=render_error_definition())
    instance = trigger_create(workflow=wf, idempotency_key="k", payload=PAYLOAD).instance
    engine.step_execute(instance_id=instance.pk)  # hello: sent
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="notifyflow"):
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    [line] = _records(caplog, "notifyflow.engine")
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert str(instance.pk) in message and "node text" in message
    assert "payload.nmae" in message or "nmae" in message  # the template error itself
    assert "instance failed: permanent error" in message


@pytest.mark.django_db
def test_a_transient_failure_warning_says_when_it_is_retried(caplog, dispatched, monkeypatch):
    from executions.providers.base import ProviderError

    def refuse(step):
        raise ProviderError("SMTP 421 try later", permanent=False)

    monkeypatch.setattr(node_types.get("email"), "run", refuse)
    instance = trigger_create(workflow=WorkflowFactory(), idempotency_key="k", payload=PAYLOAD)
    with caplog.at_level(logging.INFO, logger="notifyflow"):
        assert engine.step_execute(instance_id=instance.instance.pk) == StepOutcome.FAILED_TRANSIENT
    [line] = _records(caplog, "notifyflow.engine")
    assert line.levelno == logging.WARNING
    assert "SMTP 421 try later" in line.getMessage() and "(retry 1 at " in line.getMessage()


@pytest.mark.django_db
def test_the_sweeper_logs_only_when_it_found_work(caplog, dispatched):
    with caplog.at_level(logging.DEBUG, logger="notifyflow"):
        tasks.sweep()
    assert [r.levelno for r in _records(caplog, "notifyflow.tasks")] == [logging.DEBUG]
    instance = trigger_create(workflow=WorkflowFactory(), idempotency_key="k", payload=PAYLOAD)
    TriggerInstance.objects.filter(pk=instance.instance.pk).update(
        dispatched_at=None, available_at=timezone.now()
    )
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="notifyflow"):
        tasks.sweep()
    [line] = _records(caplog, "notifyflow.tasks")
    assert line.levelno == logging.INFO and line.getMessage() == "sweep found work: dispatched 1"


def _celery_lines(task: str) -> None:
    """What beat and the worker log about one run of ``task`` (Celery's own calls)."""
    logging.getLogger("celery.beat").info(
        "Scheduler: Sending due task %s (%s)", f"every 5 s: {task}", task
    )
    context = {"id": "t1", "name": task, "args": "()", "kwargs": "{}", "eta": None}
    strategy.logger.info(trace.LOG_RECEIVED, context, extra={"data": context})
    trace.info(trace.LOG_SUCCESS, {**context, "return_value": "{}", "runtime": 0.01})


def test_celery_lines_about_each_sweep_are_debug_and_other_tasks_stay_info(caplog):
    caplog.set_level(logging.INFO)
    _celery_lines("notifyflow.sweep")
    assert not [r for r in caplog.records if r.name.startswith("celery")]
    _celery_lines("notifyflow.execute_node")
    assert [r.levelno for r in caplog.records if r.name.startswith("celery")] == [logging.INFO] * 3
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    _celery_lines("notifyflow.sweep")
    assert [r.levelname for r in caplog.records if r.name.startswith("celery")] == ["DEBUG"] * 3


# --- a real worker ----------------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_waits_for_a_trailing_delay_and_its_sweeper_stays_quiet(tmp_path):
    """The delay is beyond the broker horizon, so the sweeper (every second) is what
    dispatches it when due: that sweep logs its work, the idle ones before it nothing."""
    flush_broker()
    definition = email_sms_definition()
    definition["nodes"] = [
        definition["nodes"][0],
        {"id": "linger", "type": "delay", "config": {"duration": "4s"}},
    ]
    definition["edges"] = [{"from": "hello", "to": "linger"}]
    wf = WorkflowFactory(definition=definition)
    with celery_worker(tmp_path, beat=True, NOTIFYFLOW_BROKER_HORIZON_S="1"):
        started = time.monotonic()
        instance = trigger_create(workflow=wf, idempotency_key="k", payload=PAYLOAD).instance
        wait_until(
            lambda: TriggerInstance.objects.get(pk=instance.pk).status == S.COMPLETED,
            timeout=120,
            what="the instance to complete after its delay",
        )
        took = time.monotonic() - started
    done = TriggerInstance.objects.get(pk=instance.pk)
    assert took >= 4 and done.finished_at is not None
    linger = list(StepExecutionLog.objects.filter(trigger=instance, node_id="linger"))
    assert [row.parked for row in linger] == [True, False]
    assert linger[1].started_at - linger[0].started_at >= timedelta(seconds=4)
    log = (tmp_path / "worker-w1.log").read_text()
    assert "sweep found work: dispatched 1" in log, log[-3000:]
    # Beat's "Sending due task" and the worker's "received" / "succeeded" for each sweep.
    assert "Sending due task" not in log and "notifyflow.sweep[" not in log, log[-3000:]
