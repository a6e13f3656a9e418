"""Scenario 3, delay precision: how late delayed instances resume, on the shipped
workers (kombu timer fix on) and on stock kombu."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from bench.scenarios.common import Ctx, flush_broker, ms, stats_s, verdict
from bench.scenarios.drain import preload, wait_terminal
from executions import sweeper
from executions.models import StepExecutionLog
from workflows.models import Workflow

# --- 3. delay precision ----------------------------------------------------------------

# Issue 29 (issue 14: 1 s).
DELAY_TARGET_S = 0.25


def _lateness(wf: Workflow, since: datetime, delay_node: str, next_node: str) -> list[float]:
    resume: dict[Any, datetime] = {}
    started: dict[Any, datetime] = {}
    for trigger_id, node_id, started_at, output in StepExecutionLog.objects.filter(
        workflow=wf, started_at__gte=since, success=True
    ).values_list("trigger_id", "node_id", "started_at", "output"):
        if node_id == delay_node:
            resume[trigger_id] = datetime.fromisoformat(output["resume_at"])
        elif node_id == next_node:
            started[trigger_id] = started_at
    return [(started[t] - resume[t]).total_seconds() for t in resume if t in started]


def _phases(wf: Workflow, since: datetime, nodes: tuple[str, str]) -> dict[str, Any]:
    """What bounds the lateness of delays that end together: each node's steps/s (first
    start -> last finish, both worker nodes), its mean step time, and how the resumed
    steps split between the worker nodes (a node runs only the countdown messages it
    received). Delays end at the delay steps' rate; if the next steps run slower, the
    last ones are late by about n / next rate - n / delay rate."""
    out: dict[str, Any] = {}
    for node in nodes:
        rows = list(
            StepExecutionLog.objects.filter(
                workflow=wf, started_at__gte=since, success=True, node_id=node
            ).values_list("started_at", "finished_at", "worker")
        )
        if not rows:
            continue
        span = (max(r[1] for r in rows) - min(r[0] for r in rows)).total_seconds()
        by_worker: dict[str, int] = {}
        for _, _, worker in rows:
            by_worker[worker] = by_worker.get(worker, 0) + 1
        out[node] = {
            "steps": len(rows),
            "span_s": span,
            "steps_per_s": len(rows) / span if span else 0.0,
            "mean_step_ms": 1000 * sum((f - s).total_seconds() for s, f, _ in rows) / len(rows),
            "by_worker": sorted(by_worker.values(), reverse=True),
        }
    first, second = (out.get(node) for node in nodes)
    if first and second and first["steps_per_s"] and second["steps_per_s"]:
        n = second["steps"]
        out["backlog_tail_s"] = n / second["steps_per_s"] - n / first["steps_per_s"]
    return out


class Sweeper(threading.Thread):
    """Calls executions.sweeper.sweep every ``interval`` seconds (what beat would do)."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.stopped = threading.Event()
        self.passes = 0
        self.dispatched = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                self.dispatched += sweeper.sweep()["dispatched"]
                self.passes += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)
        if self.error:
            raise RuntimeError(f"sweeper crashed: {self.error!r}")


def _delay_run(
    ctx: Ctx,
    wf: Workflow,
    n: int,
    tag: str,
    extra_env: dict[str, str] | None = None,
    sweep_interval: float | None = None,
) -> tuple[dict[str, Any], int]:
    flush_broker()
    workers = ctx.procs.celery_workers(2, tag=tag, extra_env=extra_env)
    sweeper = Sweeper(sweep_interval) if sweep_interval else None
    if sweeper:
        sweeper.start()
    try:
        since = timezone.now()
        preload(wf, n, f"{tag}-{uuid.uuid4().hex[:6]}")
        wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
    finally:
        if sweeper:
            sweeper.stop()
        ctx.procs.stop_workers(workers)
    late: dict[str, Any] = {**stats_s(_lateness(wf, since, "wait", "e1"))}
    if late["n"] != n:
        raise RuntimeError(f"{tag}: lateness measured for {late['n']} of {n} instances")
    late["phases"] = _phases(wf, since, ("wait", "e1"))
    return late, sweeper.dispatched if sweeper else 0


def scenario_delay(ctx: Ctx) -> None:
    sz = ctx.sizes
    n = sz.delay_n
    wf = ctx.workflows["bench-delay"]
    # Workers as shipped: kombu's timer loop fixed (notifyflow/broker/kombu_patches.py).
    late, _ = _delay_run(ctx, wf, n, "delay")
    # The same on stock kombu, which fires at most 10 due timers per loop turn and then
    # polls for up to 1 s.
    # A comparison, not a target: full runs only (the quick run's 3-minute budget).
    late_stock = (
        None
        if ctx.quick
        else _delay_run(ctx, wf, n, "delaystock", {"NOTIFYFLOW_KOMBU_TIMER_FIX": "0"})[0]
    )
    # Beyond the broker horizon: the delay stays in the database, the sweeper wakes it.
    interval = 1.0
    late_h, swept = _delay_run(
        ctx,
        ctx.workflows["bench-horizon"],
        sz.horizon_n,
        "horizon",
        {"NOTIFYFLOW_BROKER_HORIZON_S": "2"},
        sweep_interval=interval,
    )
    ctx.results["delay"] = {
        "in_broker": {"instances": n, "delay_s": 5, **late},
        "in_broker_stock_kombu": late_stock and {"instances": n, "delay_s": 5, **late_stock},
        "beyond_horizon": {
            "instances": sz.horizon_n,
            "delay_s": 5,
            "broker_horizon_s": 2,
            "sweep_interval_s": interval,
            "sweeper_dispatched": swept,
            **late_h,
        },
    }
    ctx.row(
        "3 delay",
        f"lateness p50/p99, 5 s delay x {n} (broker countdown)",
        f"{ms(late['p50'])} / {ms(late['p99'])}",
        "resume_at",
        f"p99 < {DELAY_TARGET_S * 1000:.0f} ms",
        verdict(late["p99"] < DELAY_TARGET_S),
    )
    phases = late["phases"]
    if "backlog_tail_s" in phases:
        wait, e1 = phases["wait"], phases["e1"]
        ctx.row(
            "3 delay",
            "  same: delay steps/s -> resumed steps/s (mean step ms); resumed per node",
            f"{wait['steps_per_s']:.0f} ({wait['mean_step_ms']:.1f}) -> "
            f"{e1['steps_per_s']:.0f} ({e1['mean_step_ms']:.1f}); "
            f"{' / '.join(str(c) for c in e1['by_worker'])}",
            f"backlog tail {ms(phases['backlog_tail_s'])}",
        )
    ctx.target(
        "delay lateness p99, instances resuming together",
        ms(late["p99"]),
        f"< {DELAY_TARGET_S * 1000:,.0f} ms",
        "",
        late["p99"] < DELAY_TARGET_S,
        f"{n} instances, 5 s delay; p50 {ms(late['p50'])}",
    )
    if late_stock is not None:
        ctx.row(
            "3 delay",
            "  same, stock kombu timer loop (fix off)",
            f"{ms(late_stock['p50'])} / {ms(late_stock['p99'])}",
            "resume_at",
            "p99 < 1 s",
            verdict(late_stock["p99"] < 1.0),
        )
    ctx.row(
        "3 delay",
        f"lateness p50/p99, beyond horizon x {sz.horizon_n} (sweeper)",
        f"{ms(late_h['p50'])} / {ms(late_h['p99'])}",
        f"sweep every {interval:.0f} s",
        f"p99 <= {interval + 1:.0f} s",
        verdict(late_h["p99"] <= interval + 1),
    )
