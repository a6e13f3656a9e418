"""The happy path and branching through a real celery worker, Redis and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from executions.models import StepExecutionLog
from executions.selectors import instance_status_history
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import celery_worker, flush_broker, sent_email, sent_sms, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]


def _finished(*ids) -> bool:
    return (
        not TriggerInstance.objects.filter(pk__in=ids)
        .exclude(status__in=[TriggerStatus.COMPLETED, TriggerStatus.FAILED])
        .exists()
    )


def test_email_delay_sms_completes_with_three_step_logs(tmp_path):
    flush_broker()
    wf = WorkflowFactory(definition=email_sms_definition(delay="2s"))
    with celery_worker(tmp_path):
        instance = trigger_create(
            workflow=wf.key, idempotency_key="happy", payload=PAYLOAD
        ).instance
        wait_until(lambda: _finished(instance.pk), timeout=180, what="instance to finish")
    assert "kombu timer fix applied" in (tmp_path / "worker-w1.log").read_text()
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    assert instance.current_node_id is None
    logs = list(StepExecutionLog.objects.filter(trigger=instance).order_by("started_at"))
    assert [(log.node_id, log.success) for log in logs] == [
        ("hello", True),
        ("wait", True),
        ("text", True),
    ]
    assert instance.vars["email_hello"]["message_id"]
    assert instance.vars["sms_text"]["message_id"].startswith("file-")
    # The SMS step starts no earlier than the delay allows.
    assert logs[2].started_at >= logs[1].started_at + timedelta(seconds=2)
    assert sent_email(tmp_path) == {f"{instance.pk}:hello": 1}
    assert sent_sms(tmp_path) == {f"{instance.pk}:text": 1}
    # Every change, as the timeline lists it: creation and completion are audit rows,
    # the routine claims and releases come from the step logs.
    history = instance_status_history(instance=instance)
    changes = [(change.from_status, change.to_status) for change in history]
    assert changes == [("", "enqueued")] + [
        ("enqueued", "processing"),
        ("processing", "enqueued"),
    ] * 2 + [
        ("enqueued", "processing"),
        ("processing", "completed"),
    ]


def test_conditional_edge_picks_the_branch_for_each_payload(tmp_path):
    flush_broker()
    definition = {
        "entry_node_id": "start",
        "nodes": [
            {"id": "start", "type": "delay", "config": {"delay_ms": 0}},
            {
                "id": "pro",
                "type": "email",
                "config": {"to": "{{ payload.email }}", "subject": "Pro", "body": "pro"},
            },
            {"id": "free", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "free"}},
        ],
        "edges": [
            {"from": "start", "to": "pro", "condition": 'payload.plan == "pro"'},
            {"from": "start", "to": "free"},
        ],
    }
    wf = WorkflowFactory(definition=definition)
    with celery_worker(tmp_path):
        pro = trigger_create(
            workflow=wf.key, idempotency_key="p", payload={**PAYLOAD, "plan": "pro"}
        ).instance
        free = trigger_create(
            workflow=wf.key, idempotency_key="f", payload={**PAYLOAD, "plan": "free"}
        ).instance
        wait_until(lambda: _finished(pro.pk, free.pk), timeout=180, what="both to finish")
    assert list(StepExecutionLog.objects.filter(trigger=pro).values_list("node_id", flat=True)) == [
        "start",
        "pro",
    ]
    assert list(
        StepExecutionLog.objects.filter(trigger=free).values_list("node_id", flat=True)
    ) == ["start", "free"]
    pro.refresh_from_db()
    free.refresh_from_db()
    assert set(pro.vars) == {"email_pro"} and set(free.vars) == {"sms_free"}
