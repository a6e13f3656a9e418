"""Running instances end to end: real celery worker, Redis and PostgreSQL."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from executions.models import Delivery
from tests.factories import PAYLOAD, WorkflowFactory, wait_definition
from tests.worker import celery_worker, flush_broker, sent_email, sent_sms, wait_until
from triggers import inbox
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.inbox import InboxEvent
from triggers.services import instance_cancel, trigger_create

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]
S = TriggerStatus


def _all_finished(ids) -> bool:
    return not TriggerInstance.objects.filter(
        pk__in=ids, status__in=[S.ENQUEUED, S.PROCESSING]
    ).exists()


def test_an_event_posted_right_after_the_trigger_reaches_it_twenty_times_in_a_row(tmp_path, api):
    flush_broker()
    wf = WorkflowFactory(
        definition=wait_definition(timeout="1h", interests=["order:{{ payload.order }}"])
    )
    ids = []
    with celery_worker(tmp_path):
        for n in range(20):
            created = api.post(
                "/api/v1/triggers/",
                {
                    "workflow": wf.key,
                    "idempotency_key": f"o{n}",
                    "payload": {**PAYLOAD, "order": n},
                },
                format="json",
            )
            assert created.status_code == 201
            event = api.post(
                "/api/v1/events/",
                {"name": "reply", "event_id": f"r{n}", "subjects": [f"order:{n}"]},
                format="json",
            )
            assert event.json()["delivered"] == 1, event.json()
            ids.append(created.json()["id"])
        started = time.monotonic()
        wait_until(lambda: _all_finished(ids), timeout=180, what="20 instances to finish")
        drained = time.monotonic() - started
    instances = TriggerInstance.objects.filter(pk__in=ids)
    assert {i.status for i in instances} == {S.COMPLETED}
    assert all(i.vars["wait_listen"]["received"] for i in instances)
    assert sent_email(tmp_path) == {f"{i}:thanks": 1 for i in ids}
    assert drained < 30  # a wake, not the one-hour timeout
    print(f"\n[event after trigger] 20/20 received, drained {drained:.1f}s after the last POST")


def test_events_racing_the_deadline_give_exactly_one_outcome_each(tmp_path):
    flush_broker()
    wf = WorkflowFactory(definition=wait_definition(timeout="10s"))
    with celery_worker(tmp_path):
        instances = [
            trigger_create(workflow=wf, idempotency_key=f"d{n}", payload=PAYLOAD).instance
            for n in range(12)
        ]
        ids = [i.pk for i in instances]
        # Each at its wait (or already past it: whatever the load, never a 180 s hang).
        not_there_yet = TriggerInstance.objects.filter(
            pk__in=ids, current_node_id="listen", waiting_for_event__isnull=True
        )
        wait_until(lambda: not not_there_yet.exists(), timeout=180, what="all to park")
        # 12 events spread across the earliest deadline, 50 ms apart (the 10 s timeout
        # leaves a loaded machine time to park them all first).
        parked = TriggerInstance.objects.filter(pk__in=ids, waiting_for_event="reply")
        deadline = min((i.wait_deadline for i in parked), default=timezone.now())
        time.sleep(max(0.0, (deadline - timezone.now()).total_seconds() - 0.3))
        for n, instance in enumerate(instances):
            inbox.deliver(
                name="reply", event_id=f"e{n}", context={}, subjects=[f"instance:{instance.pk}"]
            )
            time.sleep(0.05)
        wait_until(lambda: _all_finished(ids), timeout=180, what="finish")
    received = 0
    for instance in TriggerInstance.objects.filter(pk__in=[i.pk for i in instances]):
        got = instance.vars["wait_listen"]["received"]
        consumed = InboxEvent.objects.filter(instance=instance, consumed_at__isnull=False).count()
        assert consumed == (1 if got else 0), instance.pk  # never both, never neither
        received += got
    assert sent_email(tmp_path).total() + sent_sms(tmp_path).total() == 12
    print(f"\n[deadline race] received={received} timed_out={12 - received}")


def test_cancel_racing_a_running_step_records_the_send_and_never_runs_the_next(tmp_path):
    flush_broker()
    definition = {
        "entry_node_id": "text",
        "nodes": [
            {"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "hi"}},
            {
                "id": "mail",
                "type": "email",
                "config": {"to": "{{ payload.email }}", "subject": "s", "body": "b"},
            },
        ],
        "edges": [{"from": "text", "to": "mail"}],
    }
    wf = WorkflowFactory(definition=definition)
    with celery_worker(
        tmp_path, SMS_BACKEND="tests.fakes.SlowFileSmsBackend", NOTIFYFLOW_TEST_SMS_DELAY_S="2"
    ):
        instance = trigger_create(workflow=wf, idempotency_key="slow", payload=PAYLOAD).instance
        wait_until(
            lambda: TriggerInstance.objects.filter(pk=instance.pk, status=S.PROCESSING).exists(),
            timeout=180,
            what="the step to start",
        )
        instance_cancel(instance_id=instance.pk, actor="ops", reason="customer left")
        wait_until(
            lambda: (
                Delivery.objects.filter(instance=instance, status="sent").exists()
                and instance.step_logs.exists()
            ),
            timeout=180,
            what="the running step to record its send and its outcome",
        )
        # A next step wrongly enqueued by the running one would be received by now.
        time.sleep(1.5)
    instance.refresh_from_db()
    assert instance.status == S.CANCELLED
    assert sent_sms(tmp_path) == {f"{instance.pk}:text": 1}
    assert sent_email(tmp_path) == {}
    assert instance.step_logs.get().error_kind == "cancelled"
