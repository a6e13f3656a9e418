"""Scenario 4b, hold and RSS: long delays hold nothing in the broker, and worker RSS
stays flat over many delay steps."""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.utils import timezone

from bench.infra import broker_backlog, raise_if_any_died, rss_kib
from bench.scenarios.common import Ctx, S, flush_broker, verdict
from bench.scenarios.drain import StallWatch, close_out, preload
from executions.models import StepExecutionLog
from triggers.models import TriggerInstance


def scenario_hold_and_rss(ctx: Ctx) -> None:
    """hold_n instances sleep on a 1 h delay (beyond the broker horizon): the broker must
    hold nothing for them. The same hold_n delay steps measure worker RSS growth."""
    sz = ctx.sizes
    wf = ctx.workflows["bench-long"]
    flush_broker()
    since = timezone.now()
    steps_qs = StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
    workers = ctx.procs.celery_workers(2, tag="hold")
    checkpoint = max(1, sz.hold_n // 10)
    samples: dict[str, Any] = {"start": [rss_kib(w.pid) for w in workers]}

    def steps_done() -> int:
        return steps_qs.count()

    def sample() -> None:
        if "checkpoint" not in samples and steps_done() >= checkpoint:
            samples["checkpoint"] = [rss_kib(w.pid) for w in workers]
            samples["checkpoint_steps"] = steps_done()

    try:
        preload(wf, sz.hold_n, f"hold-{uuid.uuid4().hex[:6]}", chunk=1000, on_chunk=sample)
        deadline = time.monotonic() + sz.drain_timeout_s
        waiting_qs = TriggerInstance.objects.filter(
            workflow=wf, created_at__gte=since, status=S.ENQUEUED, current_node_id="e1"
        )
        watch = StallWatch(wf, since)
        while time.monotonic() < deadline:
            sample()
            done = steps_done()
            if done >= sz.hold_n and waiting_qs.count() >= sz.hold_n:
                break
            watch.check(done)
            raise_if_any_died(workers)
            time.sleep(0.5)
        else:
            raise RuntimeError(f"hold: {steps_done()}/{sz.hold_n} delay steps in time")
        time.sleep(1.0)
        samples["end"] = [rss_kib(w.pid) for w in workers]
        samples["end_steps"] = steps_done()
        backlog = broker_backlog()
        waiting = waiting_qs.count()
        undispatched = waiting_qs.filter(dispatched_at__isnull=True).count()
    finally:
        ctx.procs.stop_workers(workers)
    close_out(wf)
    rss_10 = sum(samples.get("checkpoint", samples["start"]))
    rss_end = sum(samples["end"])
    growth = rss_end / rss_10 - 1 if rss_10 else 0.0
    ctx.results["hold_rss"] = {
        "instances": sz.hold_n,
        "waiting": waiting,
        "waiting_undispatched": undispatched,
        "broker": backlog,
        "rss_kib": samples,
        "growth": growth,
    }
    held = backlog["ready"] + backlog["unacked"]
    ctx.row(
        "4 cost",
        f"broker messages for {waiting} instances on a 1 h delay",
        f"{backlog['ready']} ready + {backlog['unacked']} unacked",
        "",
        "0",
        verdict(held == 0),
    )
    ctx.row(
        "4 cost",
        f"worker RSS after {samples['end_steps']} steps (2 nodes)",
        f"{rss_end / 1024:.1f} MiB",
        f"{rss_10 / 1024:.1f} MiB after {samples.get('checkpoint_steps', 0)} steps",
        "<= +10%",
        verdict(growth <= 0.10, f"{growth:+.1%}"),
    )
