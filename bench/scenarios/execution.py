"""Scenario 2, execution: steps per second on real workers, next to bare Celery
tasks (noop, relay, a durable step by hand) and, in full runs, peer engines."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.utils import timezone

from bench import costs
from bench.costs import Meter
from bench.infra import DB_NAME, REDIS_DB, broker_backlog
from bench.scenarios.common import (
    DISTURBANCES,
    DURABLE_SHARE,
    PAYLOAD,
    PEER_LEAD,
    Ctx,
    S,
    flush_broker,
    ms,
    peer_target,
    stats_s,
    verdict,
)
from bench.scenarios.drain import preload, step_rate, wait_terminal
from notifyflow.celery import app as celery_app
from triggers.models import TriggerInstance
from triggers.services import trigger_create

# --- 2. execution ----------------------------------------------------------------------


def _drain_reference(
    ctx: Ctx,
    tag: str,
    send: Callable[[], None],
    expected: int,
    bg: dict[str, float],
    steps_sql: tuple[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """Messages sent first, then 2 worker nodes drain them (as the app's run): tasks/s
    from the tasks' own first/last timestamps, per-step costs from the Meter (worker CPU
    from the tasks' own process_time, so the workers' start-up is not counted)."""
    flush_broker()
    send()
    workers = ctx.procs.celery_workers(2, tag=tag)
    meter = Meter(DB_NAME, [w.pid for w in workers], bg, steps_sql, REDIS_DB)
    meter.start()
    deadline = time.monotonic() + ctx.sizes.drain_timeout_s
    while time.monotonic() < deadline:
        backlog = broker_backlog()
        if backlog["ready"] == 0 and backlog["unacked"] == 0:
            break
        time.sleep(0.05)
    else:
        ctx.procs.stop_workers(workers)
        raise RuntimeError(f"{tag} reference not drained: {broker_backlog()}")
    cost = meter.stop(expected)
    stats = ctx.procs.stop_workers(workers)
    count = sum(s["count"] for s in stats)
    firsts = [s["first"] for s in stats if s["count"]]
    lasts = [s["last"] for s in stats if s["count"]]
    span = max(lasts) - min(firsts) if firsts else 0.0
    task_cpu = sum(s.get("cpu_last", 0.0) - s.get("cpu_first", 0.0) for s in stats)
    if count:
        cost["worker_cpu_ms_per_step_meter"] = cost["worker_cpu_ms_per_step"]
        cost["worker_cpu_ms_per_step"] = task_cpu * 1000 / count
    if count != expected:
        note = f"{tag} reference ran {count} of {expected} tasks (broker flushed?)"
        print(f"    warning: {note}", flush=True)
        DISTURBANCES.append(note)
    return {
        "tasks": count,
        "span_s": span,
        "tasks_per_s": count / span if span else 0.0,
        "per_node": stats,
        "cost": cost,
    }


def _noop_reference(ctx: Ctx, bg: dict[str, float]) -> dict[str, Any]:
    from bench.reference_app.tasks import noop

    def send() -> None:
        with celery_app.producer_or_acquire() as producer:
            for _ in range(ctx.sizes.noop_n):
                noop.apply_async(producer=producer)

    return _drain_reference(ctx, "noop", send, ctx.sizes.noop_n, bg)


def _relay_reference(ctx: Ctx, bg: dict[str, float]) -> dict[str, Any]:
    """3-step chains of bench.relay: each task publishes its successor, then acks."""
    from bench.reference_app.tasks import relay

    n = ctx.sizes.exec_n

    def send() -> None:
        with celery_app.producer_or_acquire() as producer:
            for i in range(n):
                relay.apply_async(args=(str(i), 3), producer=producer)

    return _drain_reference(ctx, "relay", send, 3 * n, bg)


REFSTEP_SQL = """
INSERT INTO bench_reference_refstep
  (id, status, current_node_id, attempts, lease_token, locked_by, locked_until,
   available_at, payload, created_at, updated_at, finished_at)
SELECT gen_random_uuid(), 'enqueued', 'e1', 0, NULL, '', NULL, now(), %s::jsonb, now(),
       now(), NULL
FROM generate_series(1, %s)
RETURNING id
"""


def _durable_reference(ctx: Ctx, bg: dict[str, float]) -> dict[str, Any]:
    """3-step chains of bench.durable_step: relay + claim UPDATE + advance UPDATE."""
    from bench.reference_app.tasks import durable_step

    n = ctx.sizes.exec_n
    with connection.cursor() as cur:
        cur.execute("TRUNCATE bench_reference_refstep")
        cur.execute(REFSTEP_SQL, [json.dumps(PAYLOAD), n])
        ids = [str(r[0]) for r in cur.fetchall()]
        cur.execute("ANALYZE bench_reference_refstep")

    def send() -> None:
        with celery_app.producer_or_acquire() as producer:
            for step_id in ids:
                durable_step.apply_async(args=(step_id,), producer=producer)

    done_sql = (
        "SELECT coalesce(sum(CASE WHEN status = 'completed' THEN 3 WHEN current_node_id = 's1'"
        " THEN 1 WHEN current_node_id = 'e2' THEN 2 ELSE 0 END), 0) "
        "FROM bench_reference_refstep",
        [],
    )
    out = _drain_reference(ctx, "durable", send, 3 * n, bg, done_sql)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM bench_reference_refstep WHERE status = 'completed'")
        out["completed_chains"] = cur.fetchone()[0]
    if out["completed_chains"] != n:
        raise RuntimeError(f"durable reference: {out['completed_chains']} of {n} chains done")
    return out


def _peers(ctx: Ctx, bg: dict[str, float]) -> dict[str, Any]:
    """DBOS Transact and procrastinate, same workflow and sizes (bench/peers/)."""
    from bench.peers import runner

    out: dict[str, Any] = {}
    if not ctx.peers:
        msg = "skipped (quick mode or --no-peers); --peers runs them"
        print(f"    peers {msg}", flush=True)
        return {name: {"skipped": msg} for name in runner.PEERS}
    sz = ctx.sizes
    for name in runner.PEERS:
        if runner.version(name) is None:
            msg = f"peer {name} skipped: cannot import it (pip install -e '.[bench]')"
            print(f"    {msg}", flush=True)
            out[name] = {"skipped": msg}
            continue
        for attempt in (1, 2):  # once more: the shared server may be out of connections
            try:
                out[name] = runner.run_peer(
                    ctx.procs,
                    name,
                    f"{DB_NAME}_peer_{name}",
                    sz.exec_n,
                    latency_n=max(20, int(20 * sz.latency_s)),
                    latency_rate=20.0,
                    timeout_s=sz.drain_timeout_s,
                    bg=bg,
                )
                break
            except Exception as exc:  # noqa: BLE001 - a peer failing is reported, not fatal
                msg = f"peer {name} failed (attempt {attempt}): {exc!r}"[:600]
                print(f"    {msg}", flush=True)
                out[name] = {"skipped": msg}
                DISTURBANCES.append(msg)
                time.sleep(5)
    return out


def scenario_execution(ctx: Ctx) -> None:
    sz = ctx.sizes
    wf = ctx.workflows["bench-exec"]
    flush_broker()
    # Server-wide WAL and Redis traffic of the neighbours, subtracted from every drain.
    bg = costs.background(1.0 if ctx.quick else 5.0)
    ref = _noop_reference(ctx, bg)
    relay = _relay_reference(ctx, bg)
    durable = _durable_reference(ctx, bg)

    flush_broker()
    since = timezone.now()
    preload(wf, sz.exec_n, f"exec-{uuid.uuid4().hex[:6]}")
    workers = ctx.procs.celery_workers(2, tag="exec")
    try:
        steps_sql = (
            "SELECT count(*) FROM executions_stepexecutionlog "
            "WHERE workflow_id = %s AND started_at >= %s",
            [wf.pk, since],
        )
        meter = Meter(DB_NAME, [w.pid for w in workers], bg, steps_sql, REDIS_DB)
        meter.start()
        status = wait_terminal(wf, sz.exec_n, sz.drain_timeout_s, since=since, procs=workers)
        rate = step_rate(wf, since)
        cost = meter.stop()
        # Latency: an open-loop trickle through trigger_create at half the measured
        # instance throughput, so the figure is service time, not queueing of a backlog.
        per_s = max(1.0, rate["steps_per_s"] / 3 * 0.5)
        total = max(10, int(per_s * sz.latency_s))
        lat_since = timezone.now()
        t0 = time.monotonic()
        prefix = f"lat-{uuid.uuid4().hex[:6]}"
        for i in range(total):
            pause = t0 + i / per_s - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            trigger_create(workflow=wf, idempotency_key=f"{prefix}-{i}", payload=PAYLOAD)
        wait_terminal(wf, total, sz.drain_timeout_s, since=lat_since, procs=workers)
    finally:
        ctx.procs.stop_workers(workers)
    lat = [
        (f - c).total_seconds()
        for c, f in TriggerInstance.objects.filter(
            workflow=wf, created_at__gte=lat_since, status=S.COMPLETED
        ).values_list("created_at", "finished_at")
    ]
    lstats = stats_s(lat)
    peers = _peers(ctx, bg)
    app_rate = rate["steps_per_s"]
    ctx.results["execution"] = {
        "workers": "2 nodes x celery -P solo (-c 1), prefetch 1, acks_late",
        "instances": sz.exec_n,
        "status": status,
        "rate": rate,
        "cost": cost,
        "noop_reference": ref,
        "relay_reference": relay,
        "durable_reference": durable,
        "peers": peers,
        "latency": {"instances_per_s": per_s, "count": total, **lstats},
        "background": bg,
    }
    d_rate = durable["tasks_per_s"]
    ratio = app_rate / d_rate if d_rate else 0.0
    ctx.row(
        "2 execution",
        f"node steps/s ({sz.exec_n} x 3-node)",
        f"{app_rate:.0f}",
        f"{d_rate:.0f} minimal durable step",
        f">= {DURABLE_SHARE:.0%} of ref",
        verdict(ratio >= DURABLE_SHARE, f"{ratio:.0%}"),
    )
    for label, r in (
        ("  ref: no-op task", ref),
        ("  ref: relay (consume, publish next, ack)", relay),
        ("  ref: minimal durable step (relay + claim + advance)", durable),
    ):
        share = app_rate / r["tasks_per_s"] if r["tasks_per_s"] else 0.0
        ctx.row("2 execution", label, f"{r['tasks_per_s']:.0f} tasks/s", "", "", f"app {share:.0%}")
    ctx.row(
        "2 execution",
        f"trigger->completed p50/p99 at {per_s:.0f} inst/s",
        f"{ms(lstats['p50'])} / {ms(lstats['p99'])}",
        "",
        "(no target)",
    )
    ctx.target(
        f"execution steps/s >= {DURABLE_SHARE:.0%} of minimal durable step",
        app_rate,
        DURABLE_SHARE * d_rate,
        "steps/s",
        ratio >= DURABLE_SHARE,
        f"{ratio:.0%} of {d_rate:.0f}; relay {relay['tasks_per_s']:.0f}, "
        f"no-op {ref['tasks_per_s']:.0f}",
    )
    for name, res in peers.items():
        if "skipped" in res:
            ctx.target(
                peer_target(name),
                app_rate,
                "peer",
                "steps/s",
                None,
                res["skipped"][:80],
            )
            continue
        p_rate = res["rate"]["steps_per_s"]
        ahead = PEER_LEAD.get(name, 1.0)
        ctx.row(
            "2 execution",
            f"  peer: {name} {res['version']} (2 procs, {' '.join(res['worker_args'])})",
            f"{p_rate:.0f} steps/s",
            f"p50/p99 enqueue->done {ms(res['latency']['p50'])} / "
            f"{ms(res['latency']['p99'])} at {res['latency']['per_s']:.0f} wf/s",
            f"app >= {ahead}x" if ahead > 1 else "app ahead",
            verdict(app_rate >= ahead * p_rate, f"app {app_rate / p_rate:.2f}x" if p_rate else ""),
        )
        ctx.target(
            peer_target(name),
            app_rate,
            f">= {ahead * p_rate:,.0f} steps/s",
            "steps/s",
            app_rate >= ahead * p_rate,
            f"{name} {res['version']}; app {app_rate / p_rate:.2f}x" if p_rate else "",
        )
    # Per-step costs: the capacity model's inputs (bench/SCALING.md).
    for label, c in (
        ("NotifyFlow step", cost),
        ("no-op task", ref["cost"]),
        ("relay", relay["cost"]),
        ("minimal durable step", durable["cost"]),
        *[(f"peer {k}", v["cost"]) for k, v in peers.items() if "cost" in v],
    ):
        ctx.row("2 cost/step", label, costs.per_step_line(c))
