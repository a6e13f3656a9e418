"""Per-workflow concurrency under several real ``celery worker`` processes:
each step of the workflows below calls a slow local receiver, which records how many
requests were in flight at once. With a limit of 2 - for the whole workflow, and per key
with two keys - the receiver never sees more than 2 at once (per key), and every
instance completes; the same setup without a limit sees more (so the test can fail)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.fake_http import FakeEndpoint
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import TriggerItem, trigger_create_bulk
from workflows.concurrency import Concurrency
from workflows.models import Workflow
from workflows.services import workflow_save

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WORKERS = 2
SLOTS_PER_WORKER = 3  # 6 steps can run at once: far more than the limit
LIMIT = 2


def _webhook_workflow(key: str, url: str, concurrency: Concurrency | None) -> Workflow:
    definition = {
        "entry_node_id": "call",
        "nodes": [
            {
                "id": "call",
                "type": "webhook",
                "config": {"url": url, "body": {"n": "{{ payload.n }}"}},
            }
        ],
        "edges": [],
    }
    return workflow_save(key=key, name=key, definition=definition, concurrency=concurrency)


def _trigger(workflow: Workflow, count: int, tenants: tuple[str, ...] = ("t",)) -> None:
    items = [
        TriggerItem(workflow.key, f"{workflow.key}-{n}", {"n": n, "tenant": tenants[n % 2 and -1]})
        for n in range(count)
    ]
    outcomes = trigger_create_bulk(items=items)
    assert {o.status for o in outcomes} == {"created"}


def _completed(*workflows: Workflow) -> bool:
    rows = TriggerInstance.objects.filter(workflow__in=workflows)
    return rows.exists() and not rows.exclude(status=TriggerStatus.COMPLETED).exists()


def test_limits_hold_per_workflow_and_per_key_and_no_limit_exceeds_them(tmp_path, settings):
    flush_broker()
    with FakeEndpoint() as receiver, ExitStack() as stack:
        receiver.delay_s = 0.6
        host = f"127.0.0.1:{receiver.port}"
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [host]
        whole = _webhook_workflow("whole", f"{receiver.url}/whole", Concurrency(limit=LIMIT))
        per_key = _webhook_workflow(
            "per-key",
            f"{receiver.url}/per-key/{{{{ payload.tenant }}}}",
            Concurrency(limit=LIMIT, key="{{ payload.tenant }}"),
        )
        free = _webhook_workflow("free", f"{receiver.url}/free", None)
        for n in range(WORKERS):
            stack.enter_context(
                celery_worker(
                    tmp_path,
                    name=f"w{n}",
                    # The sweeper too: a message lost on the way (a deferred step's
                    # re-send included) is sent again, as in production.
                    beat=n == 0,
                    pool="prefork",
                    concurrency=SLOTS_PER_WORKER,
                    NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=host,
                    NOTIFYFLOW_WEBHOOK_SECRET="whsec-test",
                )
            )
        # One workflow at a time, so each has every worker slot to itself.
        peaks = {}
        for workflow, count, tenants in (
            (whole, 8, ("t",)),
            (per_key, 12, ("acme", "globex")),
            (free, 8, ("t",)),
        ):
            _trigger(workflow, count, tenants)
            wait_until(
                lambda workflow=workflow: _completed(workflow),
                timeout=240,
                what=f"every instance of {workflow.key} completed",
            )
            peaks.update(receiver.peak)
    # Never more than the limit at once (per key), and the limit was reached.
    assert peaks["whole"] == LIMIT, peaks
    assert peaks["per-key/acme"] <= LIMIT and peaks["per-key/globex"] <= LIMIT, peaks
    # The two keys are limited apart, not together: more than one key's limit at once.
    assert peaks["per-key"] > LIMIT, peaks
    # The same steps without a limit: more at once (the test can fail).
    assert peaks["free"] > LIMIT, peaks
    assert len(receiver.received) == 8 + 12 + 8  # each step called the receiver once
