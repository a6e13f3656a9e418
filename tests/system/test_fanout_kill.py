"""A list fan-out survives its worker: a real ``celery worker`` (the standard command, no
``-Q``: it must consume the bulk queue) is killed -9 mid-fan-out; a new worker with beat
resumes the job once its lease expires; every member gets exactly one instance."""

from __future__ import annotations

import time

import pytest

from recipients.models import ListMembership, Recipient, RecipientList
from tests.factories import PAYLOAD, WorkflowFactory
from tests.worker import celery_worker, flush_broker, kill9, wait_until
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, trigger_create_for_recipients
from workflows.models import Workflow

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
N = 6000
ENV = {
    "NOTIFYFLOW_FANOUT_BATCH": "100",
    "NOTIFYFLOW_FANOUT_LEASE_S": "3",
}


def test_kill_9_mid_fanout_resumes_and_creates_each_instance_once(tmp_path, capsys):
    flush_broker()
    wf = WorkflowFactory(key="newsletter")
    # Paused: the instances' steps wait, so the workers spend their time on the fan-out.
    Workflow.objects.filter(pk=wf.pk).update(is_paused=True)
    group = RecipientList.objects.create(key="everyone")
    ids = [f"user-{n:05}" for n in range(N)]
    Recipient.objects.bulk_create([Recipient(id=rid) for rid in ids])
    ListMembership.objects.bulk_create([ListMembership(list=group, recipient_id=r) for r in ids])

    def position() -> int:
        return FanOut.objects.values_list("position", flat=True).first() or 0

    with celery_worker(tmp_path, name="doomed", **ENV) as worker:
        result = trigger_create_for_recipients(
            workflow="newsletter",
            idempotency_key="issue-1",
            payload=PAYLOAD,
            recipients=[RecipientEntry(id="user-00007"), RecipientEntry(list_key="everyone")],
        )
        assert result.fanout is not None and result.fanout.expected == N - 1
        wait_until(lambda: position() >= 500, timeout=120, interval=0.01, what="a few batches")
        kill9(worker)
    at_kill = position()
    assert at_kill < N - 1, "the kill came after the job finished: make N larger"
    started = time.monotonic()
    with celery_worker(tmp_path, name="survivor", beat=True, **ENV):
        wait_until(
            lambda: FanOut.objects.filter(status="done").exists(),
            timeout=180,
            what="the fan-out to finish",
        )
    resumed_s = time.monotonic() - started
    job = FanOut.objects.get()
    rows = TriggerInstance.objects.filter(workflow=wf, idempotency_key="issue-1")
    assert rows.count() == N
    assert rows.values("recipient_id").distinct().count() == N
    assert (job.expected, job.position, job.created, job.duplicates) == (N - 1, N - 1, N - 1, 0)
    with capsys.disabled():
        print(
            f"\n[fan-out kill -9] members={N} position_at_kill={at_kill} "
            f"instances={rows.count()} finished_after={resumed_s:.1f}s"
        )
