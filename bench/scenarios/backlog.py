"""Scenario "backlog" (issue 44, noticed): what the sweeper re-sends while the workers
work through a queue deeper than NOTIFYFLOW_REDISPATCH_AFTER_S.

N due instances of a one-email workflow are queued at once in their lane; the 2 usual
worker nodes drain them while the sweeper thread passes every second, with
NOTIFYFLOW_REDISPATCH_AFTER_S scaled down to 5 s so that the drain outlasts it several
times (as a 100,000-member fan-out outlasts the default 30 s). Two drains in the same
run:

- **queue depth asked** (as shipped): the sweeper re-sends at most the due, dispatched,
  unclaimed instances beyond the lane's queue depth (``executions.sweeper.lost_messages``);
- **time only** (the rule before, and what an embedded broker still gets): every
  instance unclaimed 5 s after its message is re-sent.

Reported: messages re-sent per instance, the drain's steps/s and its time. Nothing is
lost in either; every re-sent message is one more a worker takes, claims for nothing
or runs the step from, and acks while the backlog waits. Quick runs: 2,000 instances,
re-sent after 1 s.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

from django.conf import settings
from django.utils import timezone

from bench.scenarios.common import EMAIL, Ctx, chain, flush_broker
from bench.scenarios.delay import Sweeper
from bench.scenarios.drain import preload, wait_terminal
from workflows.services import workflow_save

KEY = "bench-backlog"
N, QUICK_N = 20_000, 2_000
REDISPATCH_AFTER_S, QUICK_REDISPATCH_AFTER_S = 5.0, 1.0
SWEEP_EVERY_S = 1.0


def _drain(ctx: Ctx, n: int, tag: str) -> dict[str, Any]:
    wf = workflow_save(key=KEY, name=KEY, definition=chain([("e1", "email", EMAIL)]), actor="bench")
    flush_broker()
    workers = ctx.procs.celery_workers(2, tag=tag)
    sweeper = Sweeper(SWEEP_EVERY_S)
    try:
        since = timezone.now()
        preload(wf, n, f"{tag}-{uuid.uuid4().hex[:6]}")
        sweeper.start()
        wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
        seconds = (timezone.now() - since).total_seconds()
    finally:
        sweeper.stop()
        ctx.procs.stop_workers(workers)
    return {
        "instances": n,
        "resent": sweeper.dispatched,
        "resent_per_instance": sweeper.dispatched / n,
        "drain_s": seconds,
        "instances_per_s": n / seconds,
        "sweeper_passes": sweeper.passes,
    }


def scenario_backlog(ctx: Ctx) -> None:
    n, after_s = (QUICK_N, QUICK_REDISPATCH_AFTER_S) if ctx.quick else (N, REDISPATCH_AFTER_S)
    previous = settings.NOTIFYFLOW_REDISPATCH_AFTER_S
    settings.NOTIFYFLOW_REDISPATCH_AFTER_S = after_s
    try:
        asked = _drain(ctx, n, "backlog")
        # The rule before: the broker "cannot say", as an embedded one.
        with mock.patch("triggers.dispatch.ready_messages", return_value=None):
            timed = _drain(ctx, n, "backlogtime")
    finally:
        settings.NOTIFYFLOW_REDISPATCH_AFTER_S = previous
    ctx.results["backlog"] = {"queue_depth_asked": asked, "time_only": timed}
    for label, figures in (("queue depth asked", asked), ("time only (before)", timed)):
        ctx.row(
            "44 backlog",
            f"{n:,} queued at once, re-sent after {after_s:g} s, sweep every 1 s: {label}",
            f"{figures['resent']:,} re-sent ({figures['resent_per_instance']:.2f} / instance)",
            f"drain {figures['drain_s']:.1f} s, {figures['instances_per_s']:.0f} instances/s",
        )
