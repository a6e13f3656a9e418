"""What every bench scenario shares: the workflows, the sizes (full and quick), the
result table and targets, the context set up once per run (web and worker processes,
preloading, waits), and the helpers that measure (load generator, step rates, stalls).

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
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import Max, Min
from django.utils import timezone

from bench.infra import OUT_DIR, ROOT, Procs, broker_backlog, manage, redis_client
from bench.loadgen import percentile
from executions.models import StepExecutionLog
from notifyflow.celery import app as celery_app
from notifyflow.ids import uuid7
from triggers.models import TriggerInstance, TriggerStatus
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


def chain(nodes: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "entry_node_id": nodes[0][0],
        "nodes": [{"id": i, "type": t, "config": c} for i, t, c in nodes],
        "edges": [{"from": a[0], "to": b[0]} for a, b in zip(nodes, nodes[1:], strict=False)],
    }


WORKFLOWS: dict[str, dict[str, Any]] = {
    # The ingestion target (its instances are never executed).
    "bench-ingest": chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
    # Scenario 2: email -> sms -> email, no delay.
    "bench-exec": chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
    # Scenario 3: a 5 s delay, then an email.
    "bench-delay": chain([("wait", "delay", {"delay_ms": 5000}), ("e1", "email", EMAIL)]),
    "bench-horizon": chain([("wait", "delay", {"delay_ms": 5000}), ("e1", "email", EMAIL)]),
    # Scenario 4: a delay far beyond the broker horizon.
    "bench-long": chain([("wait", "delay", {"delay_ms": 3_600_000}), ("e1", "email", EMAIL)]),
    # Scenario 6: wait for "go" (1 h), then an email. The fan-out (10k instances of one
    # campaign), its hand-made reference, the in-process delivery profile and the
    # event -> step latency each use their own copy, so their counts never mix.
    **{
        key: chain([("w", "wait", {"event": "go", "timeout": "1h"}), ("e1", "email", EMAIL)])
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
        **chain([("e1", "email", EMAIL), ("s1", "sms", SMS), ("e2", "email", EMAIL)]),
        "interests": ["order:{{ payload.order }}", "user:{{ payload.email }}"],
    },
    "bench-nointerests": chain(
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
    "preference check: step with / without preferences",  # issue 26
    "people: list fan-out instances/s",
    "people: POST /triggers/ with 100 inline recipients, instances/s",
    "people: list of N single-email instances drained, steps/s",
    "gates: batch arrival steps/s >= plain step / 1.5",  # issue 27
    "gates: N arrivals at one batch key -> one digest, all counted",
    "gates: throttle steps/s >= plain step / 1.2",
]


BULK_TARGET = "bulk POST /triggers/bulk/ triggers/s"
BULK_TARGET_RATE = 5000.0


def derive_targets(ctx: Ctx) -> None:
    """Targets a scenario reported only as a figure in ``ctx.results``:
    ``results["bulk"]["triggers_per_s"]`` -> the bulk target, unless recorded."""
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


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
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


def out_dir(ctx_or_quick: Ctx | bool, kind: str) -> Path:
    """var/bench/{plans,profiles}/ for full runs, .../quick/ for quick ones."""
    quick = ctx_or_quick.quick if isinstance(ctx_or_quick, Ctx) else ctx_or_quick
    return OUT_DIR / kind / "quick" if quick else OUT_DIR / kind


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


def park(wf: Workflow, n: int, prefix: str, subject: str | None) -> list[uuid.UUID]:
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
