"""Two worker processes racing over the same instances, each message delivered twice."""

from __future__ import annotations

import pytest

from executions.models import Delivery, DeliveryStatus, StepExecutionLog
from executions.selectors import instance_status_history
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.worker import celery_worker, flush_broker, sent_email, sent_sms, wait_until
from triggers.dispatch import dispatch_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]
N = 200


def test_two_workers_execute_every_node_exactly_once(tmp_path):
    flush_broker()
    wf = WorkflowFactory(definition=email_sms_definition())
    with (
        celery_worker(tmp_path, name="a", pool="prefork", concurrency=2),
        celery_worker(tmp_path, name="b", pool="prefork", concurrency=2),
    ):
        ids = []
        for n in range(N):
            instance = trigger_create(
                workflow=wf.key, idempotency_key=f"race-{n}", payload=PAYLOAD
            ).instance
            # A duplicate message for every instance.
            dispatch_on_commit(instance.pk, lane=instance.lane)
            ids.append(instance.pk)
        wait_until(
            lambda: TriggerInstance.objects.filter(status=TriggerStatus.COMPLETED).count() == N,
            timeout=300,
            what=f"{N} instances to complete",
        )
        log_a = (tmp_path / "worker-a.log").read_text()
        log_b = (tmp_path / "worker-b.log").read_text()
    assert "succeeded" in log_a and "succeeded" in log_b, "both workers took part"
    assert StepExecutionLog.objects.count() == 2 * N
    assert StepExecutionLog.objects.filter(success=True).count() == 2 * N
    assert Delivery.objects.filter(status=DeliveryStatus.SENT, attempts=1).count() == 2 * N
    emails, sms = sent_email(tmp_path), sent_sms(tmp_path)
    assert len(emails) == N and set(emails.values()) == {1}
    assert len(sms) == N and set(sms.values()) == {1}
    # Duplicates and races never claimed twice: two claims per instance in its history.
    claims = sum(
        (change.from_status, change.to_status) == ("enqueued", "processing")
        for instance in TriggerInstance.objects.all()
        for change in instance_status_history(instance=instance)
    )
    assert claims == 2 * N
