"""Scenario "digests" (issue 43): N scheduled batches due at one minute, closed by the
real machinery.

N recipients each have one open batch of a ``batch`` node with ``schedule: {cron: "* * *
* *"}`` (one arrival, its opener parked in the batch), all due at the same upcoming
minute - bulk-inserted as the engine leaves them (the instance enqueued at the node,
``parked_on = "batch"``, ``available_at`` = the batch's ``closes_at``, nothing in the
broker: a digest opened hours before its time is held in the database). Then the 2
usual worker nodes and the sweeper thread (what beat runs every
NOTIFYFLOW_SWEEP_INTERVAL_S: 1 s in the bench) start before the minute, early enough for
the sweeper to hand every opener to the broker as a countdown (``dispatch_upcoming``,
``NOTIFYFLOW_SWEEP_BATCH`` per pass). At the minute the first openers' steps close every
due batch of the node set-based (``gates.batches.close_due``); each opener then
continues with its digest in its own step.

Close lateness: a thread polls the number of closed batches every 20 ms; the k-th batch
counts as closed when the count first reaches k (commit-visible, not the ``closed_at``
the statement writes, which is its step's start). Target p99 <= 1 s. Also reported: the
openers' steps finished (digest handed on) minus the minute.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench.infra import raise_if_any_died
from bench.scenarios.common import Ctx, chain, flush_broker, ms, stats_s, verdict
from bench.scenarios.delay import Sweeper
from executions.models import StepExecutionLog
from gates.models import Batch, BatchItem, BatchStatus
from notifyflow.ids import uuid7
from recipients.models import Recipient
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus
from workflows.models import Workflow
from workflows.services import workflow_save

DIGEST_WF = "bench-digest"
DEFINITION = chain([("collect", "batch", {"schedule": {"cron": "* * * * *"}})])
TARGET = "digests: N scheduled batches due at one minute closed, lateness p99"
TARGET_S = 1.0
# Setting up N rows and starting the workers must end before the minute, and the sweeper
# needs N / NOTIFYFLOW_SWEEP_BATCH passes to hand the openers over.
LEAD_S = 30
CHUNK = 2000
POLL_S = 0.02


class ClosedPoller(threading.Thread):
    """Samples (time, closed batches of the workflow) until ``n`` are closed."""

    def __init__(self, wf: Workflow, n: int) -> None:
        super().__init__(daemon=True)
        self.wf, self.n = wf, n
        self.samples: list[tuple[datetime, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            closed = Batch.objects.filter(workflow=self.wf, status=BatchStatus.CLOSED)
            while not self.stopped.is_set():
                count = closed.count()
                self.samples.append((timezone.now(), count))
                if count >= self.n:
                    return
                time.sleep(POLL_S)
        finally:
            connection.close()

    def lateness(self, due: datetime) -> list[float]:
        """Per batch: when the closed count first reached its rank, minus ``due``."""
        out: list[float] = []
        for at, count in self.samples:
            while len(out) < min(count, self.n):
                out.append((at - due).total_seconds())
        return out


def _due_minute(lead_s: float) -> datetime:
    """The first whole minute at least ``lead_s`` from now."""
    at = timezone.now() + timedelta(seconds=lead_s)
    return at.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _load(wf: Workflow, n: int, run: str, due: datetime) -> None:
    """N recipients, each with one open batch (its opener parked in it), due at ``due``."""
    version = wf.current_version
    assert version is not None
    now = timezone.now()
    for start in range(0, n, CHUNK):
        ids = range(start, min(start + CHUNK, n))
        people = [Recipient(id=f"{run}-{i}", email=f"{run}-{i}@example.com") for i in ids]
        Recipient.objects.bulk_create(people, batch_size=CHUNK)
        openers = [
            TriggerInstance(
                id=uuid7(),
                workflow_id=wf.pk,
                workflow_version_id=version.pk,
                idempotency_key=f"{run}-{person.id}",
                payload={"text": person.id},
                recipient_id=person.id,
                status=TriggerStatus.ENQUEUED,
                current_node_id="collect",
                parked_on=ParkedOn.BATCH,
                available_at=due,
                wait_deadline=due,
                lane=wf.priority,
            )
            for person in people
        ]
        TriggerInstance.objects.bulk_create(openers, batch_size=CHUNK)
        batches = [
            Batch(
                id=uuid7(),
                workflow_id=wf.pk,
                node_id="collect",
                recipient_id=opener.recipient_id,
                key="",
                opener_id=opener.pk,
                opened_at=now,
                closes_at=due,
                item_count=1,
            )
            for opener in openers
        ]
        Batch.objects.bulk_create(batches, batch_size=CHUNK)
        BatchItem.objects.bulk_create(
            [
                BatchItem(batch_id=b.pk, instance_id=b.opener_id, seq=1, joined_at=now)
                for b in batches
            ],
            batch_size=CHUNK,
        )


def _wait_closed(wf: Workflow, n: int, timeout_s: float, procs: list[Any]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        raise_if_any_died(procs)
        done = TriggerInstance.objects.filter(workflow=wf, status=TriggerStatus.COMPLETED).count()
        if done >= n:
            return
        time.sleep(0.5)
    raise RuntimeError(f"digests: {done} of {n} batches closed after {timeout_s:.0f} s")


def scenario_digests(ctx: Ctx) -> None:
    n = int(os.environ.get("BENCH_DIGESTS_N") or (1_000 if ctx.quick else 10_000))
    wf = workflow_save(key=DIGEST_WF, name=DIGEST_WF, definition=DEFINITION, actor="bench")
    ctx.workflows[DIGEST_WF] = wf
    run = uuid.uuid4().hex[:6]
    flush_broker()
    interval = float(settings.NOTIFYFLOW_SWEEP_INTERVAL_S)
    due = _due_minute(LEAD_S + n / settings.NOTIFYFLOW_SWEEP_BATCH * interval)
    loaded = time.monotonic()
    _load(wf, n, run, due)
    load_s = time.monotonic() - loaded
    workers = ctx.procs.celery_workers(2, tag="digests")
    sweeper = Sweeper(interval)
    sweeper.start()
    poller = ClosedPoller(wf, n)
    poller.start()
    try:
        wait_s = (due - timezone.now()).total_seconds()
        _wait_closed(wf, n, wait_s + ctx.sizes.drain_timeout_s, workers)
    finally:
        poller.stopped.set()
        poller.join(timeout=30)
        sweeper.stop()
        ctx.procs.stop_workers(workers)
    rows = list(Batch.objects.filter(workflow=wf, closes_at=due).values_list("status", "closed_at"))
    if len(rows) != n or any(status != BatchStatus.CLOSED for status, _ in rows):
        raise RuntimeError(f"digests: {len(rows)} batches, not all {n} closed")
    late = stats_s(poller.lateness(due))
    recorded = stats_s([(closed_at - due).total_seconds() for _, closed_at in rows])
    steps = stats_s(
        [
            (finished - due).total_seconds()
            for finished in StepExecutionLog.objects.filter(
                workflow=wf, node_id="collect"
            ).values_list("finished_at", flat=True)
        ]
    )
    ctx.results["digests"] = {
        "batches": n,
        "closed_at_written": recorded,
        "opener_steps_finished": steps,
        "due": due.isoformat(),
        "load_s": load_s,
        "sweep_interval_s": interval,
        "sweeper_dispatched": sweeper.dispatched,
        "sweeper_passes": sweeper.passes,
        **late,
    }
    ok = late["p99"] <= TARGET_S
    ctx.row(
        "43 digests",
        f"{n:,} scheduled batches due at one minute: close lateness p50 / p99 / max",
        f"{ms(late['p50'])} / {ms(late['p99'])} / {ms(late['max'])}",
        f"sweep every {interval:g} s, {sweeper.passes} passes",
        f"p99 <= {TARGET_S:g} s",
        verdict(ok),
    )
    ctx.row(
        "43 digests",
        "  same: the openers' steps finished (digest handed on) p50 / p99 / max",
        f"{ms(steps['p50'])} / {ms(steps['p99'])} / {ms(steps['max'])}",
        "after the minute",
    )
    ctx.target(TARGET, ms(late["p99"]), f"<= {TARGET_S * 1000:,.0f} ms", "", ok, f"{n:,} batches")
