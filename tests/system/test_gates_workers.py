"""Gates under real workers, against PostgreSQL and the broker: arrivals into
one batch from several worker processes at once (no item lost or counted twice, exactly
one digest), a worker killed with ``kill -9`` while its batch is open (the digest still
goes out once), and a throttle raced by several worker processes (never more than
``limit`` through)."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

import pytest

from executions.models import StepExecutionLog
from gates import batches
from gates.models import Batch, BatchItem
from tests.factories import RecipientFactory, WorkflowFactory
from tests.worker import celery_worker, flush_broker, kill9, sent_email, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import RecipientEntry, trigger_create, trigger_create_for_recipients

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
S = TriggerStatus


def digest_definition(window: str) -> dict:
    return {
        "entry_node_id": "collect",
        "nodes": [
            {"id": "collect", "type": "batch", "config": {"window": window}},
            {
                "id": "digest",
                "type": "email",
                "config": {
                    "subject": "{{ vars.batch_collect.count }} new comments",
                    "body": "Last: {{ vars.batch_collect.last.n }}",
                },
            },
        ],
        "edges": [{"from": "collect", "to": "digest"}],
    }


def comment(n: int, workflow: str = "comments") -> None:
    trigger_create_for_recipients(
        workflow=workflow,
        idempotency_key=f"comment-{n}",
        payload={"n": n},
        recipients=[RecipientEntry(id="ada")],
    )


def finished(workflow: str, n: int) -> bool:
    rows = TriggerInstance.objects.filter(workflow__key=workflow)
    return rows.count() == n and not rows.exclude(status=S.COMPLETED).exists()


def assert_one_digest(tmp_path, n: int) -> None:
    batch = Batch.objects.get()
    assert batch.status == "closed" and batch.item_count == n
    seqs = sorted(BatchItem.objects.filter(batch=batch).values_list("seq", flat=True))
    assert seqs == list(range(1, n + 1))
    assert BatchItem.objects.values("instance").distinct().count() == n
    opener = TriggerInstance.objects.get(pk=batch.opener_id)
    assert opener.vars["batch_collect"]["count"] == n
    assert len(opener.vars["batch_collect"]["items"]) == min(n, 100)
    assert sent_email(tmp_path) == Counter({f"{opener.pk}:digest": 1})
    skipped = StepExecutionLog.objects.filter(node_id="collect", skip_reason="batched")
    assert skipped.values("trigger").distinct().count() == n - 1


def flush_when_all_arrived(n: int) -> None:
    """Close the batch (as the API's flush does) once all ``n`` arrived: the window is
    long, so no arrival can miss it whatever the machine's speed."""
    wait_until(lambda: BatchItem.objects.count() >= n, timeout=120, what="every arrival")
    batches.flush(batch_id=Batch.objects.get().pk, actor="test")


def test_arrivals_from_several_workers_make_one_digest_counting_each_once(tmp_path):
    flush_broker()
    n = 300
    WorkflowFactory(key="comments", definition=digest_definition("10m"))
    RecipientFactory(id="ada")
    with ExitStack() as stack:
        for name in ("w1", "w2", "w3"):
            stack.enter_context(celery_worker(tmp_path, name=name, pool="prefork", concurrency=2))
        for i in range(n):
            comment(i)
        flush_when_all_arrived(n)
        wait_until(lambda: finished("comments", n), timeout=120, what="every comment done")
    assert_one_digest(tmp_path, n)


def test_a_worker_killed_while_its_batch_is_open_still_sends_one_digest(tmp_path):
    flush_broker()
    n = 200
    WorkflowFactory(key="comments", definition=digest_definition("10m"))
    RecipientFactory(id="ada")
    for i in range(n // 2):
        comment(i)  # their messages wait in the broker for the worker
    with celery_worker(tmp_path, name="doomed") as doomed:
        # Killed while it works through that backlog (a step in flight, messages
        # prefetched and unacknowledged).
        wait_until(
            lambda: BatchItem.objects.count() >= n // 8, timeout=60, interval=0.005, what="arrivals"
        )
        kill9(doomed)
    at_kill = BatchItem.objects.count()
    assert at_kill < n // 2, "the kill came after the first half arrived: kill earlier"
    assert Batch.objects.get().status == "open"
    for i in range(n // 2, n):
        comment(i)
    with celery_worker(tmp_path, name="survivor", beat=True):
        # The killed worker's step is recovered when its lease ends; nothing counts twice.
        flush_when_all_arrived(n)
        wait_until(lambda: finished("comments", n), timeout=120, what="every comment done")
    assert_one_digest(tmp_path, n)


def test_a_throttle_raced_by_several_workers_lets_exactly_its_limit_through(tmp_path):
    flush_broker()
    n, limit = 120, 10
    definition = {
        "entry_node_id": "gate",
        "nodes": [
            {"id": "gate", "type": "throttle", "config": {"limit": limit, "window": "1h"}},
            {
                "id": "promo",
                "type": "email",
                "config": {
                    "to": "promo@example.com",
                    "subject": "Promo",
                    "body": "{{ payload.n }}",
                },
            },
        ],
        "edges": [{"from": "gate", "to": "promo"}],
    }
    WorkflowFactory(key="promos", definition=definition)
    with ExitStack() as stack:
        for name in ("w1", "w2", "w3"):
            stack.enter_context(celery_worker(tmp_path, name=name, pool="prefork", concurrency=2))
        for i in range(n):
            trigger_create(workflow="promos", idempotency_key=f"promo-{i}", payload={"n": i})
        wait_until(lambda: finished("promos", n), timeout=120, what="every promo done")
    assert sum(sent_email(tmp_path).values()) == limit
    throttled = StepExecutionLog.objects.filter(node_id="gate", skip_reason="throttled")
    assert throttled.count() == n - limit
    assert not StepExecutionLog.objects.filter(node_id="promo", success=False).exists()
