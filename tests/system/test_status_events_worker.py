"""Status events under a real ``celery worker`` (PostgreSQL and the broker): a
workflow run by the worker writes, for each instance, its send, its skip and its end in
sequence order 1, 2, 3 - each once, however many instances run at once."""

from __future__ import annotations

import pytest

from tests.factories import RecipientFactory, WorkflowFactory
from tests.webhook_events import subscribe, types_in_order
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import RecipientEntry, trigger_create_for_recipients

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# An email, then an SMS the recipients have no number for (skipped).
EMAIL_THEN_SMS = {
    "entry_node_id": "hello",
    "nodes": [
        {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
        {"id": "text", "type": "sms", "config": {"body": "Hi"}},
    ],
    "edges": [{"from": "hello", "to": "text"}],
}


def test_a_worker_running_a_workflow_writes_send_skip_and_end_in_sequence_order(tmp_path):
    flush_broker()
    endpoint = subscribe("delivery.*", "step.skipped", "instance.completed")
    WorkflowFactory(key="welcome", definition=EMAIL_THEN_SMS)
    people = [RecipientFactory(phone=None) for _ in range(20)]
    trigger_create_for_recipients(
        workflow="welcome",
        idempotency_key="launch",
        payload={},
        recipients=[RecipientEntry(id=person.pk) for person in people],
    )
    instances = TriggerInstance.objects.filter(workflow__key="welcome")
    with celery_worker(tmp_path, pool="prefork", concurrency=2):
        wait_until(
            lambda: instances.filter(status=TriggerStatus.COMPLETED).count() == len(people),
            timeout=120,
            what="every instance completed",
        )
    for instance in instances:
        assert types_in_order(endpoint, instance.pk) == [
            (1, "delivery.sent"),
            (2, "step.skipped"),
            (3, "instance.completed"),
        ]
