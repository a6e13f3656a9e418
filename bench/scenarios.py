"""The bench scenarios. Imported by run.py after django.setup() with bench settings.

Every figure is measured next to an in-run reference. Nothing here asserts a speed:
a scenario raises only when something really broke (a process died, a drain timed out,
an instance failed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Min
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench import costs
from bench.costs import Meter
from bench.infra import (
    DB_NAME,
    OUT_DIR,
    REDIS_DB,
    ROOT,
    Procs,
    broker_backlog,
    free_port,
    manage,
    redis_client,
    rss_kib,
)
from bench.loadgen import percentile
from executions import engine
from executions.models import StepExecutionLog
from notifyflow.celery import app as celery_app
from notifyflow.ids import uuid7
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create
from workflows.models import Workflow
from workflows.services import workflow_save

S = TriggerStatus
PAYLOAD = {"email": "ada@example.com", "name": "Ada", "phone": "+15005550006"}
EMAIL = {
    "to": "{{ payload.email }}",
    "subject": "Hello {{ payload.name }}",
    "body": "Hi {{ payload.name }}, this is step {{ trigger.attempts }}.",
}
SMS = {"to": "{{ payload.phone }}", "body": "Hi {{ payload.name }}, a text for you."}


def _chain(nodes: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "entry_node_id": nodes[0][0],
        "nodes": [{"id": i, "type": t, "config": c} for i, t, c in nodes],
        "edges": [{"from": a[0], "to": b[0]} for a, b in zip(nodes, nodes[1:], strict=False)],
    }


WORKFLOWS: dict[str, dict[str, Any]] = {
    # The ingestion target (its instances are never executed).
    "bench-ingest": _chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
    # Scenario 2: email -> sms -> email, no delay.
    "bench-exec": _chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
    # Scenario 3: a 5 s delay, then an email.
    "bench-delay": _chain([("wait", "delay", {"delay_ms": 5000}), ("e1", "email", EMAIL)]),
    "bench-horizon": _chain([("wait", "delay", {"delay_ms": 5000}), ("e1", "email", EMAIL)]),
    # Scenario 4: a delay far beyond the broker horizon.
    "bench-long": _chain([("wait", "delay", {"delay_ms": 3_600_000}), ("e1", "email", EMAIL)]),
    # Scenario 6: wait for "go" (1 h), then an email. The fan-out (10k instances of one
    # campaign), its hand-made reference, the in-process delivery profile and the
    # event -> step latency each use their own copy, so their counts never mix.
    **{
        key: _chain([("w", "wait", {"event": "go", "timeout": "1h"}), ("e1", "email", EMAIL)])
        for key in (
            "bench-fanout",
            "bench-fanout-ref",
            "bench-fanout-prof",
            "bench-wakeup",
            "bench-cost-wait",
        )
    },
    # Scenario 6: POST /triggers/ with two interests, and the same workflow without.
    "bench-interests": {
        **_chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
        "interests": ["order:{{ payload.order }}", "user:{{ payload.email }}"],
    },
    "bench-nointerests": _chain(
        [("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]
    ),
}


@dataclass
class Sizes:
    ingest_rounds: int
    ingest_s: float
    ingest_warmup_s: float
    exec_n: int
    noop_n: int
    latency_s: float
    delay_n: int
    horizon_n: int
    cost_k: int
    cost_sweeps: int
    big_rows: int
    hold_n: int
    profile_exec_n: int
    profile_s: float
    drain_timeout_s: float
    fanout_n: int
    wake_n: int
    wake_per_s: float


FULL = Sizes(
    ingest_rounds=3,
    ingest_s=6,
    ingest_warmup_s=1,
    exec_n=20_000,
    noop_n=20_000,
    latency_s=20,
    delay_n=2_000,
    horizon_n=300,
    cost_k=1_000,
    cost_sweeps=300,
    big_rows=1_000_000,
    hold_n=100_000,
    profile_exec_n=4_000,
    profile_s=10,
    drain_timeout_s=1800,
    fanout_n=10_000,
    wake_n=300,
    wake_per_s=20,
)
QUICK = Sizes(
    ingest_rounds=1,
    ingest_s=2,
    ingest_warmup_s=0.5,
    exec_n=300,
    noop_n=1_000,
    latency_s=3,
    delay_n=100,
    horizon_n=30,
    cost_k=100,
    cost_sweeps=30,
    big_rows=20_000,
    hold_n=1_000,
    profile_exec_n=300,
    profile_s=2,
    drain_timeout_s=120,
    fanout_n=500,
    wake_n=30,
    wake_per_s=20,
)


@dataclass
class Row:
    scenario: str
    metric: str
    value: str
    reference: str = ""
    target: str = ""
    verdict: str = ""


@dataclass
class Target:
    """One line of the final verdict table (issue 14's targets)."""

    name: str
    measured: str
    target: str
    verdict: str
    note: str = ""


def _num(value: float | str, unit: str) -> str:
    if isinstance(value, str):
        return value
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
    return f"{text} {unit}".strip()


@dataclass
class Ctx:
    sizes: Sizes
    quick: bool
    procs: Procs
    token: str
    peers: bool = True
    rows: list[Row] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    workflows: dict[str, Workflow] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)

    def row(self, *args: str) -> None:
        self.rows.append(Row(*args))
        print(f"    {' | '.join(a for a in args if a)}", flush=True)

    def target(
        self,
        name: str,
        measured: float | str,
        target: float | str,
        unit: str = "",
        ok: bool | None = None,
        note: str = "",
    ) -> None:
        """Record one target for the final verdict table (printed by run.py, never
        asserted). ``ok=None`` = not measured in this run (printed as "not run").

        ``ctx.target("bulk POST /triggers/bulk/", 6120, ">= 5,000", "triggers/s",
        6120 >= 5000)``"""
        word = "not run" if ok is None else ("met" if ok else "MISSED")
        self.targets.append(Target(name, _num(measured, unit), _num(target, unit), word, note))


# --- helpers ---------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def stats_s(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else 0.0,
        "mean": sum(values) / len(values) if values else 0.0,
    }


def verdict(ok: bool, how: str = "") -> str:
    return ("met" if ok else "MISSED") + (f" ({how})" if how else "")


# Issue 14's targets, in the order of the final verdict table; one not recorded by a
# scenario of this run is printed as "not run".
EXPECTED_TARGETS = [
    "execution steps/s >= 75% of minimal durable step",
    "execution ahead of dbos",
    "execution ahead of procrastinate",
    "ingestion POST req/s, new keys >= 90% of bare DRF",
    "ingestion POST req/s, repeated keys >= 90% of bare DRF",
    "bulk POST /triggers/bulk/ triggers/s",  # = BULK_TARGET
    "delay lateness p99, instances resuming together",
    "event -> next step started p99",
    "1 event -> N waiting: inbox rows committed",
    "1 event -> N waiting: all next steps dispatched",
    "cost at 1M rows: claim p50",
    "cost at 1M rows: sweeper pass p50",
    "cost at 1M rows: POST (trigger_create) new key p50",
    "cost at 1M rows: POST (trigger_create) repeated key p50",
    "cost at 1M rows: event delivery p50",
]


BULK_TARGET = "bulk POST /triggers/bulk/ triggers/s"
BULK_TARGET_RATE = 5000.0


def derive_targets(ctx: Ctx) -> None:
    """Targets a scenario reported only as a figure in ``ctx.results`` (so bench/bulk.py
    needs no call of ours): ``results["bulk"]["triggers_per_s"]`` -> the bulk target."""
    if any(t.name == BULK_TARGET for t in ctx.targets):
        return
    bulk = ctx.results.get("bulk") or {}
    for key in ("triggers_per_s", "rate", "rps"):
        value = bulk.get(key) if isinstance(bulk, dict) else None
        if isinstance(value, int | float):
            ctx.target(
                BULK_TARGET,
                float(value),
                BULK_TARGET_RATE,
                "triggers/s",
                value >= BULK_TARGET_RATE,
                f"results['bulk']['{key}']",
            )
            return


def setup(procs: Procs, quick: bool, peers: bool = True) -> Ctx:
    token = manage("create_api_key", "bench").strip().splitlines()[-1]
    sizes = QUICK if quick else FULL
    if os.environ.get("BENCH_EXEC_N"):  # scenario 2 (and its references, peers) only
        sizes = dataclasses.replace(sizes, exec_n=int(os.environ["BENCH_EXEC_N"]))
    ctx = Ctx(sizes=sizes, quick=quick, procs=procs, token=token, peers=peers)
    for key, definition in WORKFLOWS.items():
        ctx.workflows[key] = workflow_save(key=key, name=key, definition=definition, actor="bench")
    return ctx


def flush_broker() -> None:
    redis_client().flushdb()


def preload(
    wf: Workflow,
    n: int,
    prefix: str,
    *,
    chunk: int = 5000,
    on_chunk: Callable[[], None] | None = None,
) -> list[uuid.UUID]:
    """Create ``n`` due instances with one bulk INSERT per chunk and send their first
    message, as trigger_create would, without the per-request cost."""
    from executions.tasks import execute_node

    version = wf.current_version
    entry = version.definition["entry_node_id"]
    ids: list[uuid.UUID] = []
    for start in range(0, n, chunk):
        now = timezone.now()
        rows = [
            TriggerInstance(
                id=uuid7(),  # the product's ids (notifyflow.ids)
                workflow=wf,
                workflow_version=version,
                idempotency_key=f"{prefix}-{i}",
                payload=PAYLOAD,
                status=S.ENQUEUED,
                current_node_id=entry,
                vars={},
                attempts=0,
                available_at=now,
                dispatched_at=now,
            )
            for i in range(start, min(n, start + chunk))
        ]
        TriggerInstance.objects.bulk_create(rows, batch_size=1000)
        with celery_app.producer_or_acquire() as producer:
            for row in rows:
                execute_node.apply_async(args=(str(row.id),), producer=producer)
        ids.extend(r.id for r in rows)
        if on_chunk:
            on_chunk()
    return ids


# Things outside the bench that disturbed a run (recorded in the JSON report).
DISTURBANCES: list[str] = []


class StallWatch:
    """Notices when the broker lost our messages (this machine is shared: a test that
    runs Redis FLUSHALL empties db 9 too) and re-sends them, as the sweeper would after
    NOTIFYFLOW_REDISPATCH_AFTER_S. No progress for ``after_s`` with an empty broker and
    due enqueued instances left = lost messages."""

    def __init__(self, wf: Workflow, since: datetime | None, after_s: float = 20.0) -> None:
        self.wf, self.since, self.after_s = wf, since, after_s
        self.last_value: int | None = None
        self.last_change = time.monotonic()

    def check(self, progress: int) -> None:
        now = time.monotonic()
        if progress != self.last_value:
            self.last_value, self.last_change = progress, now
            return
        if now - self.last_change < self.after_s:
            return
        backlog = broker_backlog()
        if backlog["ready"] or backlog["unacked"]:
            return
        from executions.tasks import execute_node

        qs = TriggerInstance.objects.filter(
            workflow=self.wf, status=S.ENQUEUED, available_at__lte=timezone.now()
        )
        if self.since is not None:
            qs = qs.filter(created_at__gte=self.since)
        ids = list(qs.values_list("id", flat=True))
        with celery_app.producer_or_acquire() as producer:
            for instance_id in ids:
                execute_node.apply_async(args=(str(instance_id),), producer=producer)
        note = (
            f"{self.wf.key}: no progress for {self.after_s:.0f} s and an empty broker: "
            f"re-sent {len(ids)} lost messages (external Redis flush?)"
        )
        print(f"    warning: {note}", flush=True)
        DISTURBANCES.append(note)
        self.last_change = now


def wait_terminal(
    wf: Workflow,
    n: int,
    timeout_s: float,
    *,
    since: datetime | None = None,
    procs: Iterable[Any] = (),
    poll_s: float = 0.25,
) -> dict[str, int]:
    """Poll until ``n`` instances of ``wf`` (created since ``since``) are finished."""
    qs = TriggerInstance.objects.filter(workflow=wf)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    deadline = time.monotonic() + timeout_s
    done = 0
    watch = StallWatch(wf, since)
    while time.monotonic() < deadline:
        done = qs.filter(status__in=[S.COMPLETED, S.FAILED]).count()
        if done >= n:
            break
        watch.check(done)
        for proc in procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} died:\n{proc.tail()}")
        time.sleep(poll_s)
    else:
        raise RuntimeError(f"{wf.key}: only {done}/{n} instances finished in {timeout_s:.0f} s")
    failed = qs.filter(status=S.FAILED).count()
    if failed:
        sample = qs.filter(status=S.FAILED).values_list("last_error", flat=True).first()
        print(f"    warning: {failed} {wf.key} instances failed, e.g. {sample}", flush=True)
    return {"finished": done, "failed": failed}


def close_out(wf: Workflow) -> None:
    """Mark every unfinished instance of ``wf`` completed (so no sweeper ever picks it)."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE triggers_triggerinstance SET status='completed', current_node_id=NULL, "
            "lease_token=NULL, locked_by='', locked_until=NULL, finished_at=now(), "
            "updated_at=now() WHERE workflow_id=%s AND status IN ('enqueued','processing')",
            [wf.pk],
        )


def step_rate(wf: Workflow, since: datetime) -> dict[str, float]:
    logs = StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
    agg = logs.aggregate(first=Min("started_at"), last=Max("finished_at"))
    count = logs.count()
    span = (agg["last"] - agg["first"]).total_seconds() if count else 0.0
    return {"steps": count, "span_s": span, "steps_per_s": count / span if span else 0.0}


def loadgen(
    port: int,
    path: str,
    token: str,
    workflow: str,
    mode: str,
    duration: float,
    warmup: float,
    prefix: str,
    concurrency: int = 4,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "bench.loadgen",
        "--port",
        str(port),
        "--path",
        path,
        "--token",
        token,
        "--workflow",
        workflow,
        "--mode",
        mode,
        "--duration",
        str(duration),
        "--warmup",
        str(warmup),
        "--prefix",
        prefix,
        "--concurrency",
        str(concurrency),
        *extra,
    ]
    done = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=duration + warmup + 120
    )
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- 1. ingestion ----------------------------------------------------------------------


def _combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge rounds of one (target, mode): req/s over the summed time, exact percentiles."""
    lat = [x for r in runs for x in r.pop("latencies_ms")]
    ok = sum(r["ok"] for r in runs)
    duration = sum(r["duration_s"] for r in runs)
    statuses: dict[str, int] = {}
    for r in runs:
        for code, count in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + count
    return {
        "rounds": len(runs),
        "ok": ok,
        "errors": sum(r["errors"] for r in runs),
        "statuses": statuses,
        "duration_s": duration,
        "rps": ok / duration,
        "rps_per_round": [round(r["rps"], 1) for r in runs],
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
    }


def scenario_ingestion(ctx: Ctx) -> None:
    sz = ctx.sizes
    app_port, ref_port = free_port(), free_port()
    ref = ctx.procs.gunicorn("gunicorn-reference", ref_port, workers=2)
    app = ctx.procs.gunicorn("gunicorn-app", app_port, workers=2)
    out: dict[str, Any] = {"server": "gunicorn -k sync -w 2 (each)", "client_concurrency": 4}
    run_id = uuid.uuid4().hex[:6]
    raw: dict[str, list[dict[str, Any]]] = {}
    try:
        # Rounds alternate reference and app, so a noisy neighbour hits both alike.
        for mode in ("new", "repeat"):
            for rnd in range(sz.ingest_rounds):
                for name, port, path in (
                    ("reference", ref_port, "/bench/ref/triggers/"),
                    ("app", app_port, "/api/v1/triggers/"),
                ):
                    # repeat mode: every round replays the same key pool.
                    prefix = f"{name}-{mode}-{run_id}" + (f"-{rnd}" if mode == "new" else "")
                    res = loadgen(
                        port,
                        path,
                        ctx.token,
                        "bench-ingest",
                        mode,
                        sz.ingest_s,
                        sz.ingest_warmup_s,
                        prefix,
                    )
                    if res["ok"] == 0:
                        raise RuntimeError(f"ingestion {name}/{mode}: nothing succeeded: {res}")
                    raw.setdefault(f"{name}_{mode}", []).append(res)
    finally:
        ctx.procs.stop(app)
        ctx.procs.stop(ref)
    for key, runs in raw.items():
        out[key] = _combine(runs)
    close_out(ctx.workflows["bench-ingest"])
    flush_broker()
    ctx.results["ingestion"] = out
    for mode in ("new", "repeat"):
        a, r = out[f"app_{mode}"], out[f"reference_{mode}"]
        ratio = a["rps"] / r["rps"] if r["rps"] else 0.0
        ctx.row(
            "1 ingestion",
            f"POST req/s, {mode} keys",
            f"{a['rps']:.0f}",
            f"{r['rps']:.0f} (bare DRF get_or_create)",
            ">= 90% of ref",
            verdict(ratio >= 0.9, f"{ratio:.0%}"),
        )
        ctx.target(
            "ingestion POST req/s, "
            + ("new keys" if mode == "new" else "repeated keys")
            + " >= 90% of bare DRF",
            a["rps"],
            0.9 * r["rps"],
            "req/s",
            ratio >= 0.9,
            f"{ratio:.0%} of {r['rps']:.0f} (bare DRF get_or_create, same run)",
        )
        ctx.row(
            "1 ingestion",
            f"POST p50/p99, {mode} keys",
            f"{a['p50_ms']:.1f} / {a['p99_ms']:.1f} ms",
            f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms",
            "p99 < 50 ms",
            verdict(a["p99_ms"] < 50),
        )
        if a["errors"] or r["errors"]:
            ctx.row("1 ingestion", f"errors, {mode} keys", str(a["statuses"]), str(r["statuses"]))


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
        msg = "skipped in quick mode (3-minute budget); --peers runs them"
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
    bg = costs.background(2.0 if ctx.quick else 5.0)
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
        ">= 75% of ref",
        verdict(ratio >= 0.75, f"{ratio:.0%}"),
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
        "execution steps/s >= 75% of minimal durable step",
        app_rate,
        0.75 * d_rate,
        "steps/s",
        ratio >= 0.75,
        f"{ratio:.0%} of {d_rate:.0f}; relay {relay['tasks_per_s']:.0f}, "
        f"no-op {ref['tasks_per_s']:.0f}",
    )
    for name, res in peers.items():
        if "skipped" in res:
            ctx.target(
                f"execution ahead of {name}",
                app_rate,
                "peer",
                "steps/s",
                None,
                res["skipped"][:80],
            )
            continue
        p_rate = res["rate"]["steps_per_s"]
        ctx.row(
            "2 execution",
            f"  peer: {name} {res['version']} (2 procs, {' '.join(res['worker_args'])})",
            f"{p_rate:.0f} steps/s",
            f"p50/p99 enqueue->done {ms(res['latency']['p50'])} / "
            f"{ms(res['latency']['p99'])} at {res['latency']['per_s']:.0f} wf/s",
            "app ahead",
            verdict(app_rate > p_rate, f"app {app_rate / p_rate:.2f}x" if p_rate else ""),
        )
        ctx.target(
            f"execution ahead of {name}",
            app_rate,
            f"> {p_rate:,.0f} steps/s",
            "steps/s",
            app_rate > p_rate,
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


# --- 3. delay precision ----------------------------------------------------------------


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


class Sweeper(threading.Thread):
    """Calls executions.engine.sweep every ``interval`` seconds (what beat would do)."""

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
                self.dispatched += engine.sweep()["dispatched"]
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
) -> tuple[dict[str, float], int]:
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
    late = stats_s(_lateness(wf, since, "wait", "e1"))
    if late["n"] != n:
        raise RuntimeError(f"{tag}: lateness measured for {late['n']} of {n} instances")
    return late, sweeper.dispatched if sweeper else 0


def scenario_delay(ctx: Ctx) -> None:
    sz = ctx.sizes
    n = sz.delay_n
    wf = ctx.workflows["bench-delay"]
    # Workers as shipped: kombu's timer loop fixed (notifyflow/broker/kombu_patches.py).
    late, _ = _delay_run(ctx, wf, n, "delay")
    # The same on stock kombu, which fires at most 10 due timers per loop turn and then
    # polls for up to 1 s.
    late_stock, _ = _delay_run(ctx, wf, n, "delaystock", {"NOTIFYFLOW_KOMBU_TIMER_FIX": "0"})
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
        "in_broker_stock_kombu": {"instances": n, "delay_s": 5, **late_stock},
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
        "p99 < 1 s",
        verdict(late["p99"] < 1.0),
    )
    ctx.target(
        "delay lateness p99, instances resuming together",
        ms(late["p99"]),
        "< 1,000 ms",
        "",
        late["p99"] < 1.0,
        f"{n} instances, 5 s delay; p50 {ms(late['p50'])}",
    )
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


# --- 4. cost at scale ------------------------------------------------------------------


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _due_instances(wf: Workflow, n: int, prefix: str) -> list[uuid.UUID]:
    version = wf.current_version
    past = timezone.now() - timedelta(seconds=1)
    rows = [
        TriggerInstance(
            id=uuid7(),  # the product's ids (notifyflow.ids)
            workflow=wf,
            workflow_version=version,
            idempotency_key=f"{prefix}-{i}",
            payload=PAYLOAD,
            status=S.ENQUEUED,
            current_node_id=version.definition["entry_node_id"],
            vars={},
            attempts=0,
            available_at=past,
            dispatched_at=past,
        )
        for i in range(n)
    ]
    TriggerInstance.objects.bulk_create(rows, batch_size=1000)
    return [r.id for r in rows]


def out_dir(ctx_or_quick: Ctx | bool, kind: str) -> Path:
    """var/bench/{plans,profiles}/ for full runs, .../quick/ for quick ones."""
    quick = ctx_or_quick.quick if isinstance(ctx_or_quick, Ctx) else ctx_or_quick
    return OUT_DIR / kind / "quick" if quick else OUT_DIR / kind


def _explain(sql: str, name: str, label: str, *, rollback: bool, quick: bool) -> str:
    plans = out_dir(quick, "plans")
    plans.mkdir(parents=True, exist_ok=True)
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            text = "\n".join(r[0] for r in cur.fetchall())
        if rollback:
            transaction.set_rollback(True)
    (plans / f"{name}.{label}.txt").write_text(f"-- {label}\n{sql}\n\n{text}\n")
    return text


def _pick(captured: list[dict[str, str]], *needles: str) -> str:
    for q in captured:
        if all(n in q["sql"] for n in needles):
            return q["sql"]
    raise RuntimeError(f"no captured query with {needles}: {[q['sql'][:80] for q in captured]}")


def _cost_pass(ctx: Ctx, label: str) -> dict[str, Any]:
    sz = ctx.sizes
    wf = ctx.workflows["bench-exec"]
    tag = f"cost-{label}-{uuid.uuid4().hex[:6]}"
    # Claim: k due instances, one claim each (what a worker's first statement does).
    ids = iter(_due_instances(wf, sz.cost_k, f"{tag}-claim"))
    claim_t = _timed(lambda: engine.claim(instance_id=next(ids), worker="bench"), sz.cost_k)
    # The sweeper pass, nothing to do (the steady state).
    sweep_t = _timed(lambda: engine.sweep(), sz.cost_sweeps)
    # trigger_create: new keys, then the same keys again.
    counter = iter(range(10**9))
    new_t = _timed(
        lambda: trigger_create(
            workflow="bench-exec", idempotency_key=f"{tag}-new-{next(counter)}", payload=PAYLOAD
        ),
        sz.cost_k,
    )
    counter = iter(range(10**9))
    rep_t = _timed(
        lambda: trigger_create(
            workflow="bench-exec", idempotency_key=f"{tag}-new-{next(counter)}", payload=PAYLOAD
        ),
        sz.cost_k,
    )

    # Event delivery: one event (by an interest subject) to one parked instance, what
    # POST /api/v1/events/ does minus HTTP; at scale each subject also names 10 finished
    # instances (BIG_INTERESTS_SQL), as a user's subject does after a while.
    from triggers.events import event_receive

    wait_wf = ctx.workflows["bench-cost-wait"]
    parked = _park(wait_wf, sz.cost_k, f"{tag}-park", None)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO triggers_interest (instance_id, subject) "
            "SELECT id, 'user:' || (row_number() OVER () - 1) FROM unnest(%s::uuid[]) AS id",
            [parked],
        )
        cur.execute("ANALYZE triggers_interest")
    subjects = iter(range(sz.cost_k))
    reached: list[int] = []

    def deliver_one() -> None:
        i = next(subjects)
        result = event_receive(
            name="go", event_id=f"{tag}-ev-{i}", context={"n": i}, subjects=[f"user:{i}"]
        )
        reached.append(len(result.delivered))

    deliver_t = _timed(deliver_one, sz.cost_k)
    if sum(reached) != sz.cost_k:
        raise RuntimeError(f"cost: event delivery reached {sum(reached)} of {sz.cost_k}")
    close_out(wait_wf)

    # EXPLAIN (ANALYZE, BUFFERS) of the statements themselves, captured from the calls.
    [due] = _due_instances(wf, 1, f"{tag}-plan")
    with transaction.atomic(), CaptureQueriesContext(connection) as cq:
        engine.claim(instance_id=due, worker="bench")
        transaction.set_rollback(True)
    _explain(
        _pick(cq.captured_queries, "UPDATE", "triggers_triggerinstance"),
        "claim_update",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    with CaptureQueriesContext(connection) as cq:
        engine.sweep()
    _explain(
        _pick(cq.captured_queries, "SELECT", "'processing'"),
        "sweep_expired_leases",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    _explain(
        _pick(cq.captured_queries, "SELECT", "'enqueued'"),
        "sweep_redispatch_due",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    with CaptureQueriesContext(connection) as cq:
        trigger_create(workflow="bench-exec", idempotency_key=f"{tag}-new-0", payload=PAYLOAD)
    _explain(
        _pick(cq.captured_queries, "SELECT", "triggers_triggerinstance", "idempotency_key"),
        "idempotency_lookup",
        label,
        rollback=True,
        quick=ctx.quick,
    )

    close_out(wf)
    flush_broker()
    return {
        "claim": stats_s(claim_t),
        "sweep": stats_s(sweep_t),
        "trigger_create_new": stats_s(new_t),
        "trigger_create_repeat": stats_s(rep_t),
        "event_delivery": stats_s(deliver_t),
    }


BULK_SQL = """
INSERT INTO triggers_triggerinstance
  (id, workflow_id, workflow_version_id, idempotency_key, payload, status, current_node_id,
   vars, attempts, available_at, lease_token, locked_by, locked_until, dispatched_at,
   last_error, created_at, updated_at, finished_at, created_by_key)
SELECT gen_random_uuid(), %(wf)s, %(ver)s, 'bulk-' || g, %(payload)s::jsonb, 'completed', NULL,
       '{}'::jsonb, 0, t, NULL, '', NULL, t, '', t, t + interval '2 seconds',
       t + interval '2 seconds', 'bench'
FROM generate_series(1, %(n)s) AS g,
     LATERAL (SELECT now() - interval '30 days' + g * interval '2 seconds' AS t) AS ts
"""


# Per finished instance: two interests ("order:<n>", unique; "user:<n mod 100k>", shared
# by 10 instances), one consumed inbox row, and a step log per node (3).
BIG_INTERESTS_SQL = """
INSERT INTO triggers_interest (instance_id, subject)
SELECT id, s FROM (
  SELECT id, row_number() OVER () AS g FROM triggers_triggerinstance
  WHERE idempotency_key LIKE 'bulk-%%'
) AS t, LATERAL (VALUES ('order:' || g), ('user:' || (g % 100000))) AS v(s)
"""
BIG_INBOX_SQL = """
INSERT INTO triggers_inboxevent
  (instance_id, name, event_id, context, received_at, consumed_at, consumed_by_node)
SELECT id, 'go', 'old-' || idempotency_key, '{}'::jsonb, created_at, created_at, 'w'
FROM triggers_triggerinstance WHERE idempotency_key LIKE 'bulk-%%'
"""
BIG_STEPLOG_SQL = """
INSERT INTO executions_stepexecutionlog
  (workflow_version, node_id, node_type, attempt, started_at, finished_at, input_context,
   output, success, error, error_kind, task_id, worker, trigger_id, workflow_id)
SELECT 1, n.node, n.kind, 1, t.created_at, t.created_at + interval '10 ms',
       %(payload)s::jsonb, '{"recipient": "ada@example.com"}'::jsonb, true, '', '', '',
       'bench', t.id, %(wf)s
FROM triggers_triggerinstance t,
     (VALUES ('e1', 'email'), ('s1', 'sms'), ('e2', 'email')) AS n(node, kind)
WHERE t.idempotency_key LIKE 'bulk-%%'
"""


def scenario_cost(ctx: Ctx) -> None:
    sz = ctx.sizes
    wf = ctx.workflows["bench-exec"]
    flush_broker()
    with connection.cursor() as cur:
        # CASCADE: every table that refers to an instance (history, deliveries and their
        # attempts and events, inbox, interests, outbox), whatever is added later.
        cur.execute("TRUNCATE triggers_triggerinstance CASCADE")
        cur.execute("VACUUM ANALYZE triggers_triggerinstance")
        cur.execute("CHECKPOINT")
    small = _cost_pass(ctx, "0")
    t0 = time.monotonic()
    with connection.cursor() as cur:
        cur.execute(
            BULK_SQL,
            {
                "wf": wf.pk,
                "ver": wf.current_version_id,
                "payload": json.dumps(PAYLOAD),
                "n": sz.big_rows,
            },
        )
        # What those instances leave behind: interests, a consumed inbox row, step logs.
        cur.execute(BIG_INTERESTS_SQL)
        cur.execute(BIG_INBOX_SQL)
        cur.execute(BIG_STEPLOG_SQL, {"wf": wf.pk, "payload": json.dumps(PAYLOAD)})
        for table in (
            "triggers_triggerinstance",
            "triggers_interest",
            "triggers_inboxevent",
            "executions_stepexecutionlog",
        ):
            cur.execute(f"VACUUM ANALYZE {table}")
        # The load wrote gigabytes of WAL: without this the passes below would time the
        # checkpoint it set off (every first write to a page after a checkpoint logs the
        # whole page), not the steady state of a large database. Both passes start right
        # after a checkpoint.
        cur.execute("CHECKPOINT")
        cur.execute(
            "SELECT (SELECT count(*) FROM triggers_interest), "
            "(SELECT count(*) FROM triggers_inboxevent), "
            "(SELECT count(*) FROM executions_stepexecutionlog)"
        )
        loaded = dict(zip(("interests", "inbox_rows", "step_logs"), cur.fetchone(), strict=True))
    load_s = time.monotonic() - t0
    big_label = (
        f"{sz.big_rows // 1000}k" if sz.big_rows < 1_000_000 else f"{sz.big_rows // 1_000_000}M"
    )
    big = _cost_pass(ctx, big_label)
    ctx.results["cost"] = {
        "rows": sz.big_rows,
        "loaded": loaded,
        "bulk_load_s": load_s,
        "0": small,
        big_label: big,
    }
    names = {
        "claim": "claim (engine.claim)",
        "sweep": "sweeper pass (engine.sweep)",
        "trigger_create_new": "trigger_create, new key",
        "trigger_create_repeat": "trigger_create, repeated key",
        "event_delivery": "event delivery (event_receive, 1 subject -> 1 parked)",
    }
    target_names = {
        "claim": "claim p50",
        "sweep": "sweeper pass p50",
        "trigger_create_new": "POST (trigger_create) new key p50",
        "trigger_create_repeat": "POST (trigger_create) repeated key p50",
        "event_delivery": "event delivery p50",
    }
    for key, title in names.items():
        a, b = small[key]["p50"], big[key]["p50"]
        ratio = b / a if a else 0.0
        ctx.row(
            "4 cost",
            f"{title} p50, {big_label} finished rows",
            ms(b),
            f"{ms(a)} with 0 rows",
            "<= 1.2x",
            verdict(ratio <= 1.2, f"{ratio:.2f}x"),
        )
        ctx.target(
            f"cost at 1M rows: {target_names[key]}",
            f"{b * 1000:.2f} ms ({ratio:.2f}x)",
            f"<= 1.2x of {a * 1000:.2f} ms",
            "",
            ratio <= 1.2,
            f"{big_label} finished rows" + ("" if big_label == "1M" else " (quick size)"),
        )


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
            for w in workers:
                if not w.alive():
                    raise RuntimeError(f"{w.name} died:\n{w.tail()}")
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


# --- 5. profiles -----------------------------------------------------------------------


def _summarize_collapsed(raw: Path, out: Path, top: int = 40) -> dict[str, Any]:
    """Top functions by self and inclusive samples from py-spy's collapsed stacks."""
    self_s: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = [
            f.split(" (")[0]
            + " ("
            + f.split(" (", 1)[1]
            .split(":")[0]
            .split("site-packages/")[-1]
            .replace(str(ROOT) + "/", "")
            + ")"
            if " (" in f
            else f
            for f in stack.split(";")
        ]
        self_s[frames[-1]] = self_s.get(frames[-1], 0) + count
        for f in set(frames):
            incl[f] = incl.get(f, 0) + count
    lines = [f"{raw.name}: {total} samples", "", "== self =="]

    def ranked(table: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(table.items(), key=lambda x: -x[1])[:top]

    lines += [f"{c / total:6.1%}  {f}" for f, c in ranked(self_s)]
    lines += ["", "== inclusive =="]
    lines += [f"{c / total:6.1%}  {f}" for f, c in ranked(incl)]
    out.write_text("\n".join(lines) + "\n")
    return {
        "samples": total,
        "inclusive_top": [
            (f, round(c / total, 3)) for f, c in sorted(incl.items(), key=lambda x: -x[1])[:top]
        ]
        if total
        else [],
    }


def _py_spy(pid: int, duration: float, raw: Path, *, subprocesses: bool = False) -> bool:
    from bench.infra import VENV_BIN

    exe = VENV_BIN / "py-spy"
    if not exe.exists():
        print("    py-spy not installed (pip install -e '.[bench]'): skipping", flush=True)
        return False
    argv = [
        str(exe),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, int(duration))),
        "--rate",
        "200",
        "--format",
        "raw",
        "--output",
        str(raw),
        "--nonblocking",
    ]
    if subprocesses:
        argv.append("--subprocesses")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if done.returncode != 0 or not raw.exists():
        print(f"    py-spy failed: {done.stderr.strip()[-300:]}", flush=True)
        return False
    return True


def _queries_per_step(ctx: Ctx, profiles: Path) -> dict[str, Any]:
    from django.test import Client

    wf = ctx.workflows["bench-exec"]
    out: dict[str, Any] = {}
    report = []
    inst = trigger_create(
        workflow=wf, idempotency_key=f"q-{uuid.uuid4().hex}", payload=PAYLOAD
    ).instance
    for _ in range(3):
        node = TriggerInstance.objects.get(pk=inst.pk).current_node_id
        with CaptureQueriesContext(connection) as cq:
            what = engine.step_execute(instance_id=inst.pk, worker="bench-inproc")
        out[f"step_{node}"] = len(cq.captured_queries)
        report.append(f"== step_execute node {node} ({what}): {len(cq.captured_queries)} queries")
        report += [f"  {q['time']}s  {q['sql'][:300]}" for q in cq.captured_queries]
    # The production guard allows only DJANGO_ALLOWED_HOSTS (not the test client's
    # "testserver"): a refused host would answer 400 without touching the database.
    client = Client(HTTP_HOST="localhost")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ctx.token}"}
    body = {"workflow": "bench-exec", "payload": PAYLOAD}
    client.post(
        "/api/v1/triggers/",
        {**body, "idempotency_key": "warm"},
        content_type="application/json",
        **auth,
    )
    for mode, key in (("new", f"q-post-{uuid.uuid4().hex}"), ("repeat", "warm")):
        with CaptureQueriesContext(connection) as cq:
            resp = client.post(
                "/api/v1/triggers/",
                {**body, "idempotency_key": key},
                content_type="application/json",
                **auth,
            )
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"profile POST answered {resp.status_code}: {resp.content[:300]!r}")
        out[f"post_{mode}"] = len(cq.captured_queries)
        report.append(
            f"== POST /api/v1/triggers/ {mode} key ({resp.status_code}): "
            f"{len(cq.captured_queries)} queries"
        )
        report += [f"  {q['time']}s  {q['sql'][:300]}" for q in cq.captured_queries]
    (profiles / "queries.txt").write_text("\n".join(report) + "\n")
    return out


def _pyinstrument(ctx: Ctx, profiles: Path) -> None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("    pyinstrument not installed: skipping in-process profiles", flush=True)
        return
    from django.test import Client

    n = 40 if ctx.quick else 500
    # The production guard allows only DJANGO_ALLOWED_HOSTS (not the test client's
    # "testserver"): a refused host would answer 400 without touching the database.
    client = Client(HTTP_HOST="localhost")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ctx.token}"}
    tag = uuid.uuid4().hex[:6]
    prof = Profiler(interval=0.0005)
    with prof:
        for i in range(n):
            client.post(
                "/api/v1/triggers/",
                {"workflow": "bench-exec", "payload": PAYLOAD, "idempotency_key": f"pi-{tag}-{i}"},
                content_type="application/json",
                **auth,
            )
    (profiles / "post_inprocess.txt").write_text(prof.output_text(unicode=True, color=False))
    (profiles / "post_inprocess.html").write_text(prof.output_html())
    ids = list(
        TriggerInstance.objects.filter(idempotency_key__startswith=f"pi-{tag}-").values_list(
            "id", flat=True
        )
    )
    prof = Profiler(interval=0.0005)
    with prof:
        for _ in range(3):
            for instance_id in ids:
                engine.step_execute(instance_id=instance_id, worker="bench-inproc")
    (profiles / "step_inprocess.txt").write_text(prof.output_text(unicode=True, color=False))
    (profiles / "step_inprocess.html").write_text(prof.output_html())


def scenario_profile(ctx: Ctx) -> None:
    sz = ctx.sizes
    profiles = out_dir(ctx, "profiles")
    profiles.mkdir(parents=True, exist_ok=True)
    flush_broker()
    queries = _queries_per_step(ctx, profiles)
    _pyinstrument(ctx, profiles)
    close_out(ctx.workflows["bench-exec"])
    flush_broker()
    spy: dict[str, Any] = {}
    # py-spy on a real gunicorn (both workers) under the ingestion load.
    port = free_port()
    app = ctx.procs.gunicorn("gunicorn-profile", port, workers=2)
    try:
        result: dict[str, Any] = {}
        load = threading.Thread(
            target=lambda: result.update(
                loadgen(
                    port,
                    "/api/v1/triggers/",
                    ctx.token,
                    "bench-ingest",
                    "new",
                    sz.profile_s + 2,
                    0.5,
                    f"spy-{uuid.uuid4().hex[:6]}",
                )
            )
        )
        load.start()
        time.sleep(1.0)
        raw = profiles / "post_gunicorn.collapsed.txt"
        if _py_spy(app.pid, sz.profile_s, raw, subprocesses=True):
            spy["post"] = _summarize_collapsed(raw, profiles / "post_gunicorn.top.txt")
        load.join()
    finally:
        ctx.procs.stop(app)
    close_out(ctx.workflows["bench-ingest"])
    # py-spy on a celery worker node draining 3-node instances.
    flush_broker()
    wf = ctx.workflows["bench-exec"]
    since = timezone.now()
    preload(wf, sz.profile_exec_n, f"spy-{uuid.uuid4().hex[:6]}")
    workers = ctx.procs.celery_workers(2, tag="profile")
    try:
        time.sleep(0.5)
        raw = profiles / "worker.collapsed.txt"
        if _py_spy(workers[0].pid, sz.profile_s, raw):
            spy["worker"] = _summarize_collapsed(raw, profiles / "worker.top.txt")
        wait_terminal(wf, sz.profile_exec_n, sz.drain_timeout_s, since=since, procs=workers)
    finally:
        ctx.procs.stop_workers(workers)
    flush_broker()
    ctx.results["profile"] = {"queries": queries, "py_spy": spy}
    ctx.row(
        "5 profile",
        "queries per step (email / sms / email)",
        f"{queries.get('step_e1')} / {queries.get('step_s1')} / {queries.get('step_e2')}",
    )
    ctx.row(
        "5 profile",
        "queries per POST (new / repeated key)",
        f"{queries.get('post_new')} / {queries.get('post_repeat')}",
    )


# --- 6. running instances: events delivered to waiting instances -----------------------

# N instances parked at the wait node "w" exactly as the wait step leaves them (enqueued,
# due at the 1 h deadline, never handed to the broker, waiting_for_event set), plus one
# interest row each: one statement, not N trigger_create calls.
# notifyflow.ids.uuid7 in SQL (PostgreSQL 15 has no uuidv7()): a random UUID whose first
# 48 bits are the millisecond clock and whose version is 7, as the product's ids are.
UUID7_SQL = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)"
    " from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid"
)
PARK_SQL = """
WITH parked AS (
  INSERT INTO triggers_triggerinstance
    (id, workflow_id, workflow_version_id, idempotency_key, payload, status, current_node_id,
     vars, attempts, available_at, lease_token, locked_by, locked_until, dispatched_at,
     last_error, waiting_for_event, wait_deadline, created_at, updated_at, finished_at,
     created_by_key)
  SELECT {uuid7}, %(wf)s, %(ver)s, %(prefix)s || '-' || g, %(payload)s::jsonb,
         'enqueued', 'w', '{}'::jsonb, 0, now() + interval '1 hour', NULL, '', NULL, NULL,
         '', 'go', now() + interval '1 hour', now(), now(), NULL, 'bench'
  FROM generate_series(1, %(n)s) AS g
  RETURNING id
), interest AS (
  INSERT INTO triggers_interest (instance_id, subject)
  SELECT id, %(subject)s::text FROM parked WHERE %(subject)s::text IS NOT NULL
)
SELECT id FROM parked
""".replace("{uuid7}", UUID7_SQL)

# The fan-out's reference: the same rows a delivery writes and the same wake, by hand
# (one INSERT ... SELECT into the inbox, one UPDATE making them due, one commit).
REF_INBOX_SQL = """
INSERT INTO triggers_inboxevent
  (instance_id, name, event_id, context, received_at, consumed_by_node)
SELECT i.instance_id, 'go', %s, '{}'::jsonb, now(), ''
FROM triggers_interest i WHERE i.subject = %s
"""
REF_WAKE_SQL = """
UPDATE triggers_triggerinstance t SET available_at = now(), dispatched_at = now()
FROM triggers_interest i
WHERE i.instance_id = t.id AND i.subject = %s AND t.status = 'enqueued'
RETURNING t.id
"""


def _park(wf: Workflow, n: int, prefix: str, subject: str | None) -> list[uuid.UUID]:
    with connection.cursor() as cur:
        cur.execute(
            PARK_SQL,
            {
                "wf": wf.pk,
                "ver": wf.current_version_id,
                "prefix": prefix,
                "payload": json.dumps(PAYLOAD),
                "n": n,
                "subject": subject,
            },
        )
        return [row[0] for row in cur.fetchall()]


def _post_json(
    port: int, path: str, token: str, body: dict[str, Any], timeout: float = 120.0
) -> tuple[int, dict[str, Any]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "POST",
            path,
            json.dumps(body),
            {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        data = json.loads(raw)
    except ValueError:
        data = {"raw": raw[:500].decode(errors="replace")}
    return resp.status, data if isinstance(data, dict) else {"data": data}


def _finished_span(wf: Workflow, start: datetime) -> float:
    """Seconds from ``start`` to the last finish of ``wf``'s instances (database clock
    of the workers' writes; same host)."""
    last = TriggerInstance.objects.filter(workflow=wf).aggregate(last=Max("finished_at"))["last"]
    return (last - start).total_seconds() if last else 0.0


def _interest_overhead(ctx: Ctx, port: int) -> dict[str, Any]:
    """POST /triggers/ to two identical workflows, one with two interests, alternating
    rounds (the one without interests first), same gunicorn, same payload."""
    sz = ctx.sizes
    run_id = uuid.uuid4().hex[:6]
    raw: dict[str, list[dict[str, Any]]] = {}
    for rnd in range(sz.ingest_rounds):
        for name, key in (("none", "bench-nointerests"), ("two", "bench-interests")):
            res = loadgen(
                port,
                "/api/v1/triggers/",
                ctx.token,
                key,
                "new",
                sz.ingest_s,
                sz.ingest_warmup_s,
                f"int-{name}-{run_id}-{rnd}",
                extra=("--order",),
            )
            if res["ok"] == 0:
                raise RuntimeError(f"interest overhead {name}: nothing succeeded: {res}")
            raw.setdefault(name, []).append(res)
    out: dict[str, Any] = {k: _combine(v) for k, v in raw.items()}
    from triggers.inbox_models import Interest

    wf = ctx.workflows["bench-interests"]
    made = TriggerInstance.objects.filter(workflow=wf).count()
    rows = Interest.objects.filter(instance__workflow=wf).count()
    if made == 0 or rows != 2 * made:
        raise RuntimeError(f"interest overhead: {rows} interest rows for {made} instances")
    out["interest_rows"] = rows
    for key in ("bench-interests", "bench-nointerests"):
        close_out(ctx.workflows[key])
    return out


def _profile_delivery(ctx: Ctx, n: int) -> dict[str, Any]:
    """The delivery of one event to n parked instances in-process (no workers running):
    its queries and a pyinstrument profile, then the instances are closed out."""
    from triggers.events import event_receive

    wf = ctx.workflows["bench-fanout-prof"]
    profiles = out_dir(ctx, "profiles")
    profiles.mkdir(parents=True, exist_ok=True)
    try:
        from pyinstrument import Profiler

        prof: Any = Profiler(interval=0.0005)
    except ImportError:
        prof = None
    t0 = time.perf_counter()
    with CaptureQueriesContext(connection) as cq:
        if prof is not None:
            prof.start()
        try:
            result = event_receive(
                name="go", event_id="prof-1", context={"campaign": 0}, subjects=["campaign:prof"]
            )
        finally:
            if prof is not None:
                prof.stop()
    wall = time.perf_counter() - t0
    if len(result.delivered) != n:
        raise RuntimeError(f"profile delivery reached {len(result.delivered)} of {n}")
    lines = [f"event_receive to {n} parked instances: {wall:.3f} s, {len(cq)} queries", ""]
    lines += [f"  {q['time']}s  {q['sql'][:240]}" for q in cq.captured_queries]
    (profiles / "running_deliver_queries.txt").write_text("\n".join(lines) + "\n")
    if prof is not None:
        (profiles / "running_deliver.txt").write_text(prof.output_text(unicode=True, color=False))
        (profiles / "running_deliver.html").write_text(prof.output_html())
    close_out(wf)
    flush_broker()
    sql_s = sum(float(q["time"]) for q in cq.captured_queries)
    return {"instances": n, "wall_s": wall, "queries": len(cq), "sql_s": sql_s}


def _fanout_reference(ctx: Ctx, n: int, workers: list[Any]) -> dict[str, Any]:
    """The same n parked instances made due by hand: the inbox rows and the wake in one
    transaction, then n messages from one producer, drained by the same workers."""
    from executions.tasks import execute_node

    wf = ctx.workflows["bench-fanout-ref"]
    start = timezone.now()
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(REF_INBOX_SQL, ["ref-1", "campaign:ref"])
        cur.execute(REF_WAKE_SQL, ["campaign:ref"])
        ids = [row[0] for row in cur.fetchall()]
    committed = time.perf_counter() - t0
    with celery_app.producer_or_acquire() as producer:
        for instance_id in ids:
            execute_node.apply_async(args=(str(instance_id),), producer=producer)
    sent = time.perf_counter() - t0
    if len(ids) != n:
        raise RuntimeError(f"fan-out reference woke {len(ids)} of {n}")
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, procs=workers)
    return {
        "committed_s": committed,
        "sent_s": sent,
        "done_s": _finished_span(wf, start),
        "status": status,
        "rate": step_rate(wf, start),
    }


def _all_dispatched(wf: Workflow, n: int, t0: float, answer: dict[str, Any]) -> tuple[float, int]:
    """Seconds from t0 until every woken instance's next step is in the broker: the POST
    has answered (a wake done in the request has sent its messages), all n are marked
    dispatched in the database and no ``wake_waiting`` task (which publishes its messages
    after its commit, then acks) is left in the queue or in flight."""
    r = redis_client()
    marker = b"notifyflow.wake_waiting"
    polls = 0
    with connection.cursor() as cur:
        while True:
            polls += 1
            cur.execute(
                "SELECT count(*) FROM triggers_triggerinstance "
                "WHERE workflow_id = %s AND dispatched_at IS NOT NULL",
                [wf.pk],
            )
            if cur.fetchone()[0] >= n and "t" in answer:
                # The oldest messages are at the list's tail (LPUSH / BRPOP): the wake tasks
                # were sent before any step message, so the tail is enough.
                queued = r.lrange("celery", -500, -1)
                inflight = r.hvals("unacked")
                if not any(marker in m for m in queued) and not any(marker in m for m in inflight):
                    return time.perf_counter() - t0, polls
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("fan-out: next steps not all dispatched after 300 s")
            time.sleep(0.005)


def _fanout(ctx: Ctx, port: int, n: int, workers: list[Any]) -> dict[str, Any]:
    """POST /api/v1/events/ with subjects ["campaign:1"] through gunicorn; the main
    thread polls the inbox (one transaction writes all n rows, so the count jumps from 0
    to n) and then the instances' completion."""
    wf = ctx.workflows["bench-fanout"]
    event_id = f"campaign-1-{uuid.uuid4().hex[:6]}"
    body = {
        "name": "go",
        "event_id": event_id,
        "context": {"campaign": 1},
        "subjects": ["campaign:1"],
    }
    answer: dict[str, Any] = {}

    def post() -> None:
        try:
            answer["status"], answer["body"] = _post_json(port, "/api/v1/events/", ctx.token, body)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            answer["error"] = repr(exc)
        answer["t"] = time.perf_counter()

    poster = threading.Thread(target=post, daemon=True)
    start = timezone.now()
    t0 = time.perf_counter()
    poster.start()
    committed: float | None = None
    polls = 0
    with connection.cursor() as cur:
        while committed is None:
            cur.execute("SELECT count(*) FROM triggers_inboxevent WHERE event_id = %s", [event_id])
            count = cur.fetchone()[0]
            polls += 1
            if count >= n:
                committed = time.perf_counter() - t0
            elif "t" in answer:
                # The POST may have committed and answered since the count above.
                cur.execute(
                    "SELECT count(*) FROM triggers_inboxevent WHERE event_id = %s", [event_id]
                )
                count = cur.fetchone()[0]
                if count < n:
                    raise RuntimeError(f"fan-out POST ended with {count}/{n} inbox rows: {answer}")
                committed = time.perf_counter() - t0
            elif time.perf_counter() - t0 > 300:
                raise RuntimeError(f"fan-out: {count}/{n} inbox rows after 300 s")
            else:
                time.sleep(0.002)
    dispatched, dispatch_polls = _all_dispatched(wf, n, t0, answer)
    poster.join(timeout=300)
    # A POST that dies after the commit (e.g. gunicorn's 30 s worker timeout while the
    # wake sends its messages) is reported, not hidden: the drain is still measured (the
    # stall watch re-sends what was never sent, as the sweeper would) and the scenario
    # fails after its rows are printed.
    failure = None
    if answer.get("status") != 202 or answer.get("body", {}).get("delivered") != n:
        failure = f"fan-out POST: {answer.get('status')} {str(answer)[:300]}"
        print(f"    warning: {failure}", flush=True)
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, procs=workers)
    return {
        "event_id": event_id,
        "failure": failure,
        "committed_s": committed,
        "commit_polls": polls,
        "dispatched_s": dispatched,
        "dispatch_polls": dispatch_polls,
        "response_s": answer.get("t", time.perf_counter()) - t0,
        "done_s": _finished_span(wf, start),
        "status": status,
        "rate": step_rate(wf, start),
    }


def _wakeup_latency(ctx: Ctx, port: int, workers: list[Any]) -> dict[str, Any]:
    """Open loop, workers idle: an event to one parked instance (subject instance:<id>)
    every 1/rate s, and half-way between two of them a POST /triggers/ of a new instance
    of the same workflow (the reference: API -> first step started, same broker hop)."""
    from triggers.inbox_models import InboxEvent

    sz = ctx.sizes
    wf = ctx.workflows["bench-wakeup"]
    tag = uuid.uuid4().hex[:6]
    ids = _park(wf, sz.wake_n, f"wake-{tag}", None)
    ref_prefix = f"wakeref-{tag}"
    sent: dict[Any, float] = {}
    ref_sent: dict[str, float] = {}
    behind = 0.0
    t0 = time.monotonic()
    for i, instance_id in enumerate(ids):
        for half, kind in ((0.0, "event"), (0.5, "trigger")):
            pause = t0 + (i + half) / sz.wake_per_s - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                behind = max(behind, -pause)
            at = time.time()
            if kind == "event":
                code, data = _post_json(
                    port,
                    "/api/v1/events/",
                    ctx.token,
                    {
                        "name": "go",
                        "event_id": f"{tag}-{i}",
                        "context": {"n": i},
                        "subjects": [f"instance:{instance_id}"],
                    },
                )
                if code != 202 or data.get("delivered") != 1:
                    raise RuntimeError(f"wake event {i}: {code} {data}")
                sent[instance_id] = at
            else:
                key = f"{ref_prefix}-{i}"
                code, data = _post_json(
                    port,
                    "/api/v1/triggers/",
                    ctx.token,
                    {"workflow": wf.key, "idempotency_key": key, "payload": PAYLOAD},
                )
                if code != 201:
                    raise RuntimeError(f"wake reference {i}: {code} {data}")
                ref_sent[key] = at
    # The woken instances complete; the reference ones park at the wait (first step).
    wait_terminal(wf, sz.wake_n, sz.drain_timeout_s, procs=workers)
    ref_rows = dict(
        TriggerInstance.objects.filter(workflow=wf, idempotency_key__startswith=ref_prefix)
        .values_list("id", "created_at")
        .order_by()
    )
    ref_keys = dict(
        TriggerInstance.objects.filter(pk__in=ref_rows).values_list("id", "idempotency_key")
    )
    deadline = time.monotonic() + sz.drain_timeout_s
    first: dict[Any, datetime] = {}
    while time.monotonic() < deadline:
        first = {}
        for trigger_id, started_at in StepExecutionLog.objects.filter(
            trigger_id__in=list(ref_rows), node_id="w"
        ).values_list("trigger_id", "started_at"):
            if trigger_id not in first or started_at < first[trigger_id]:
                first[trigger_id] = started_at
        if len(first) >= len(ref_rows):
            break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"wake reference: {len(first)}/{len(ref_rows)} first steps ran")
    received = dict(
        InboxEvent.objects.filter(instance_id__in=ids, event_id__startswith=tag).values_list(
            "instance_id", "received_at"
        )
    )
    consumed = dict(
        StepExecutionLog.objects.filter(
            trigger_id__in=ids, node_id="w", success=True, output__received=True
        ).values_list("trigger_id", "started_at")
    )
    lat = [(consumed[t] - received[t]).total_seconds() for t in received if t in consumed]
    if len(lat) != sz.wake_n:
        raise RuntimeError(f"wake latency measured for {len(lat)} of {sz.wake_n}")
    client = [consumed[t].timestamp() - sent[t] for t in consumed if t in sent]
    ref_lat = [(first[t] - ref_rows[t]).total_seconds() for t in first]
    ref_client = [first[t].timestamp() - ref_sent[ref_keys[t]] for t in first]
    close_out(wf)
    return {
        "instances": sz.wake_n,
        "events_per_s": sz.wake_per_s,
        "max_behind_schedule_s": behind,
        "event_to_step": stats_s(lat),
        "post_sent_to_step": stats_s(client),
        "reference_created_to_first_step": stats_s(ref_lat),
        "reference_post_sent_to_first_step": stats_s(ref_client),
    }


def scenario_running(ctx: Ctx) -> None:
    sz = ctx.sizes
    n = sz.fanout_n
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 2)
        mark = now

    flush_broker()
    tag = uuid.uuid4().hex[:6]
    _park(ctx.workflows["bench-fanout"], n, f"fan-{tag}", "campaign:1")
    _park(ctx.workflows["bench-fanout-ref"], n, f"fanref-{tag}", "campaign:ref")
    _park(ctx.workflows["bench-fanout-prof"], n, f"fanprof-{tag}", "campaign:prof")
    with connection.cursor() as cur:
        cur.execute("ANALYZE triggers_triggerinstance")
        cur.execute("ANALYZE triggers_interest")
    port = free_port()
    phase("park")
    app = ctx.procs.gunicorn("gunicorn-running", port, workers=2)
    phase("gunicorn_start")
    workers: list[Any] = []
    try:
        # No workers yet: the POSTs' first messages pile up in the broker, as in #1.
        overhead = _interest_overhead(ctx, port)
        phase("interest_overhead")
        profile = _profile_delivery(ctx, n)
        phase("delivery_profile")
        flush_broker()
        workers = ctx.procs.celery_workers(2, tag="running")
        phase("workers_start")
        ref = _fanout_reference(ctx, n, workers)
        phase("fanout_reference")
        fan = _fanout(ctx, port, n, workers)
        phase("fanout")
        wake = _wakeup_latency(ctx, port, workers)
        phase("wakeup_latency")
    finally:
        if workers:
            ctx.procs.stop_workers(workers)
        ctx.procs.stop(app)
    flush_broker()
    ctx.results["running"] = {
        "server": "gunicorn -k sync -w 2",
        "workers": "2 nodes x celery -P solo (-c 1), prefetch 1, acks_late",
        "fanout": {"instances": n, "app": fan, "reference": ref},
        "delivery_profile": profile,
        "interest_overhead": overhead,
        "wakeup": wake,
        "phase_s": phases,
    }
    ctx.row(
        "6 running",
        f"1 event -> {n} waiting: POST -> inbox committed",
        ms(fan["committed_s"]),
        f"{ms(ref['committed_s'])} (same rows + wake by hand, in-process)",
        "(no target)",
    )
    ctx.row(
        "6 running",
        f"  POST -> all {n} next steps dispatched (in the broker)",
        ms(fan["dispatched_s"]),
        f"{ms(ref['sent_s'])} (by hand, one producer)",
        "< 2 s",
        verdict(fan["dispatched_s"] < 2.0),
    )
    ctx.target(
        "1 event -> N waiting: inbox rows committed",
        ms(fan["committed_s"]),
        "< 2,000 ms",
        "",
        fan["committed_s"] < 2.0,
        f"N = {n}" + ("" if n >= 10_000 else " (quick size; target is for 10,000)"),
    )
    ctx.target(
        "1 event -> N waiting: all next steps dispatched",
        ms(fan["dispatched_s"]),
        "< 2,000 ms",
        "",
        fan["dispatched_s"] < 2.0,
        f"N = {n}; in the broker (DB marked + no wake task left)",
    )
    ctx.row(
        "6 running",
        f"  POST -> 202 (wake + {n} messages sent)",
        ms(fan["response_s"]) if not fan["failure"] else "FAILED (see warning)",
        f"{ms(ref['sent_s'])} (by hand, one producer)",
    )
    ratio = fan["done_s"] / ref["done_s"] if ref["done_s"] else 0.0
    ctx.row(
        "6 running",
        f"  POST -> all {n} next steps finished",
        f"{fan['done_s']:.2f} s",
        f"{ref['done_s']:.2f} s (by hand, same workers)",
        "(no target)",
        f"{ratio:.2f}x",
    )
    ctx.row(
        "6 running",
        f"  drain steps/s (wait + email, {2 * n} steps)",
        f"{fan['rate']['steps_per_s']:.0f}",
        f"{ref['rate']['steps_per_s']:.0f} (by hand)",
    )
    two, none = overhead["two"], overhead["none"]
    share = two["rps"] / none["rps"] if none["rps"] else 0.0
    ctx.row(
        "6 running",
        "POST /triggers/ req/s, 2 interests",
        f"{two['rps']:.0f}",
        f"{none['rps']:.0f} (same workflow, no interests)",
        "overhead <= 10%",
        verdict(share >= 0.9, f"{1 - share:+.1%} overhead"),
    )
    ctx.row(
        "6 running",
        "POST /triggers/ p50/p99, 2 interests",
        f"{two['p50_ms']:.1f} / {two['p99_ms']:.1f} ms",
        f"{none['p50_ms']:.1f} / {none['p99_ms']:.1f} ms",
    )
    ev, rf = wake["event_to_step"], wake["reference_created_to_first_step"]
    ctx.row(
        "6 running",
        f"event -> next step started p50/p99 ({sz.wake_n} at {sz.wake_per_s:.0f}/s)",
        f"{ms(ev['p50'])} / {ms(ev['p99'])}",
        f"{ms(rf['p50'])} / {ms(rf['p99'])} (POST /triggers/ -> 1st step)",
        "p99 < 1 s",
        verdict(ev["p99"] < 1.0),
    )
    ctx.target(
        "event -> next step started p99",
        ms(ev["p99"]),
        "< 1,000 ms",
        "",
        ev["p99"] < 1.0,
        f"{sz.wake_n} events at {sz.wake_per_s:.0f}/s; p50 {ms(ev['p50'])}",
    )
    if fan["failure"]:
        raise RuntimeError(fan["failure"])


# --- 7. bulk ingestion (bench/bulk.py) ---------------------------------------------------


def scenario_bulk(ctx: Ctx) -> None:
    from bench.bulk import scenario_bulk as run

    run(ctx)
