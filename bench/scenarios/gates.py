"""Scenario "gates" (issue 27): what a batch arrival and a throttle pass cost a step.

Two worker nodes (the bench's usual ``celery worker -P solo`` x 2, started once and
kept for the whole scenario, so every phase runs on the very same processes) drain, in
this order: reference part 1, the batch arrivals, reference part 2, the throttle
passes, reference part 3. Each phase's instances are inserted first (ORM
``bulk_create``, all due, distinct idempotency keys) and then published in one pipeline
while the nodes are idle; steps/s = the phase's steps / (first step started -> last
step finished) from ``StepExecutionLog``, as scenario 2 measures it. The CPU the two
worker processes (and our database's backends) spent during a phase, per step, comes
from /proc (``bench.costs.cpu_s``).

- **Reference, a plain step**: ``delay (delay_ms: 0)`` as the workflow's only node (one
  step per instance: the delay ends at once and the instance completes). Each part has
  N/2 instances; the batch is compared with parts 1 + 2, the throttle with parts 2 + 3
  (a neighbour's changing load weighs on both sides alike). Before part 1, a warm-up of
  WARMUP reference instances (not measured) takes the fresh nodes' first-task costs.
- **Batch arrivals**: N instances of ``batch (window 10m, key "thread-1") -> email``,
  all for ONE recipient: the first opens the batch and parks, the other N - 1 join it
  (one UPDATE ... RETURNING + one INSERT of the item) and park, skipped ``batched``.
  Arrival steps/s = N / (first step started -> last arrival step finished). Target:
  an arrival costs <= 1.5 plain steps (rate >= reference / 1.5). Then the batch is
  flushed (``gates.batches.flush``, what ``POST /api/v1/batches/{id}/flush/``
  calls): the members complete set-based, the opener continues with the digest, and
  the scenario checks - and raises if not - exactly one batch for the key, the opener's
  ``vars.batch_collect.count`` == N, exactly one email step, every instance completed.
- **Throttle**: N instances of ``throttle (limit 1000, window 1h, key
  "{{ payload.account }}", 100 accounts, scope workflow, on_limit skip)`` as the only
  node: every pass goes through (at most N / 100 hits per key), and the instance
  completes. Target: a throttle step costs <= 1.2 plain steps (rate >= reference / 1.2).

N = 10,000 (full) / 500 (quick); ``BENCH_GATES_N`` overrides it.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from django.db import connection
from django.utils import timezone

from bench.costs import cpu_s
from bench.infra import raise_if_any_died
from bench.scenarios.common import PAYLOAD, Ctx, chain, flush_broker, verdict
from bench.scenarios.drain import StallWatch, step_rate, wait_terminal
from executions.models import StepExecutionLog
from gates import batches
from gates.models import Batch, BatchStatus
from notifyflow.ids import uuid7
from recipients.models import Recipient
from triggers.dispatch import dispatch_many_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow
from workflows.services import workflow_save

BATCH_WF = "bench-gates-batch"
THROTTLE_WF = "bench-gates-throttle"
REF_WF = "bench-gates-ref"
RECIPIENT = "gates-reader"
BATCH_KEY = "thread-1"
ACCOUNTS = 100
# Unmeasured reference instances first: the fresh nodes' first tasks (imports, the first
# connection, caches) are nobody's step cost.
WARMUP = 40
DEFINITIONS = {
    BATCH_WF: chain(
        [
            ("collect", "batch", {"window": "10m", "key": BATCH_KEY}),
            (
                "digest",
                "email",
                {
                    "subject": "{{ vars.batch_collect.count }} new comments",
                    "body": "First: {{ vars.batch_collect.first.text }}",
                },
            ),
        ]
    ),
    THROTTLE_WF: chain(
        [
            (
                "gate",
                "throttle",
                {
                    "limit": 1000,
                    "window": "1h",
                    "key": "{{ payload.account }}",
                    "scope": "workflow",
                    "on_limit": "skip",
                },
            )
        ]
    ),
    REF_WF: chain([("pause", "delay", {"delay_ms": 0})]),
}
# The email goes to the recipient's address (with the unsubscribe headers).
WORKER_ENV = {"NOTIFYFLOW_PUBLIC_URL": "http://127.0.0.1:8000"}
BATCH_TARGET = "gates: batch arrival steps/s >= plain step / 1.5"
BATCH_RATIO = 1.5
DIGEST_TARGET = "gates: N arrivals at one batch key -> one digest, all counted"
THROTTLE_TARGET = "gates: throttle steps/s >= plain step / 1.2"
THROTTLE_RATIO = 1.2


def _load(wf: Workflow, n: int, prefix: str, recipient_id: str | None = None) -> list[uuid.UUID]:
    """``n`` due instances at the entry node (bulk INSERTs), not published yet."""
    version = wf.current_version
    entry = version.definition["entry_node_id"]
    ids: list[uuid.UUID] = []
    for start in range(0, n, 5000):
        now = timezone.now()
        rows = [
            TriggerInstance(
                id=uuid7(),
                workflow_id=wf.pk,
                workflow_version_id=version.pk,
                idempotency_key=f"{prefix}-{g}",
                payload={**PAYLOAD, "account": f"acct-{g % ACCOUNTS}", "text": f"comment {g}"},
                status=TriggerStatus.ENQUEUED,
                current_node_id=entry,
                vars={},
                available_at=now,
                dispatched_at=now,
                recipient_id=recipient_id,
            )
            for g in range(start, min(n, start + 5000))
        ]
        TriggerInstance.objects.bulk_create(rows, batch_size=1000)
        ids.extend(row.id for row in rows)
    return ids


def _cpu(pids: list[int]) -> float:
    return sum(cpu_s(pid) or 0.0 for pid in pids)


def _pg_pids() -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return [int(row[0]) for row in cur.fetchall()]


def _wait_steps(ctx: Ctx, wf: Workflow, n: int, since: Any, workers: list[Any]) -> None:
    """Until ``n`` steps of ``wf`` started since ``since`` are recorded (the batch's
    arrivals park: no instance finishes before the flush)."""
    logs = StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
    deadline = time.monotonic() + ctx.sizes.drain_timeout_s
    watch = StallWatch(wf, since)
    while (done := logs.count()) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{wf.key}: only {done}/{n} steps in time")
        watch.check(done)
        raise_if_any_died(workers)
        time.sleep(0.1)


def _phase(
    ctx: Ctx,
    workers: list[Any],
    wf: Workflow,
    n: int,
    prefix: str,
    *,
    recipient_id: str | None = None,
    steps: int | None = None,
) -> dict[str, Any]:
    """Load ``n`` instances, publish them, wait until they are finished (or, given
    ``steps``, until that many steps are recorded): steps/s and CPU per step."""
    since = timezone.now()
    ids = _load(wf, n, prefix, recipient_id)
    worker_pids = [proc.pid for proc in workers]
    pg_pids = _pg_pids()
    cpu0, pg0 = _cpu(worker_pids), _cpu(pg_pids)
    dispatch_many_on_commit((i, "normal") for i in ids)  # no transaction: one publish, now
    if steps is None:
        status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
        if status["failed"]:
            raise RuntimeError(f"{wf.key}: {status['failed']} instances failed")
    else:
        _wait_steps(ctx, wf, steps, since, workers)
    cpu1, pg1 = _cpu(worker_pids), _cpu(pg_pids)
    rate = step_rate(wf, since)
    count = rate["steps"] or 1
    return {
        **rate,
        "instances": n,
        "since": since,
        "worker_cpu_ms_per_step": (cpu1 - cpu0) * 1000 / count,
        "pg_cpu_ms_per_step": (pg1 - pg0) * 1000 / count,
    }


def _fifths(wf: Workflow, since: Any) -> list[float]:
    """Steps/s of the first and the last fifth of a drain's steps (in start order): does
    an arrival cost more as its batch grows?"""
    logs = list(
        StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
        .order_by("started_at")
        .values_list("started_at", "finished_at")
    )
    size = len(logs) // 5
    rates = []
    for part in (logs[:size], logs[-size:]) if size else ():
        span = (max(f for _, f in part) - part[0][0]).total_seconds()
        rates.append(len(part) / span if span else 0.0)
    return rates


def _combined(*parts: dict[str, Any]) -> dict[str, Any]:
    """Reference parts as one drain: steps over the sum of their spans, CPU weighted."""
    steps = sum(p["steps"] for p in parts)
    span = sum(p["span_s"] for p in parts)
    return {
        "steps": steps,
        "span_s": span,
        "steps_per_s": steps / span if span else 0.0,
        "worker_cpu_ms_per_step": sum(p["worker_cpu_ms_per_step"] * p["steps"] for p in parts)
        / (steps or 1),
        "pg_cpu_ms_per_step": sum(p["pg_cpu_ms_per_step"] * p["steps"] for p in parts)
        / (steps or 1),
    }


def _flush_and_check(ctx: Ctx, wf: Workflow, n: int, arrivals: dict[str, Any]) -> dict[str, Any]:
    """Flush the one open batch; wait for every instance; check the digest. Raises when
    there is not exactly one batch, one digest of N items and one email."""
    found = list(Batch.objects.filter(workflow=wf))
    if len(found) != 1 or found[0].status != BatchStatus.OPEN:
        raise RuntimeError(
            f"gates: {len(found)} batch(es) for key {BATCH_KEY!r} after {n} arrivals, "
            f"expected one open: {[(b.pk, b.status, b.item_count) for b in found]}"
        )
    started = time.perf_counter()
    batches.flush(batch_id=found[0].pk, actor="bench")
    flush_s = time.perf_counter() - started
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=arrivals["since"])
    done_s = time.perf_counter() - started
    batch = Batch.objects.get(pk=found[0].pk)
    opener = TriggerInstance.objects.get(pk=batch.opener_id)
    digest = (opener.vars or {}).get("batch_collect") or {}
    emails = StepExecutionLog.objects.filter(workflow=wf, node_id="digest")
    completed = TriggerInstance.objects.filter(
        workflow=wf, status=TriggerStatus.COMPLETED, created_at__gte=arrivals["since"]
    ).count()
    out = {
        "batches": Batch.objects.filter(workflow=wf).count(),
        "status": batch.status,
        "item_count": batch.item_count,
        "digest_count": digest.get("count"),
        "digest_items_shown": len(digest.get("items") or []),
        "email_steps": emails.count(),
        "email_ok": emails.filter(success=True).count(),
        "completed": completed,
        "failed": status["failed"],
        "flush_call_s": flush_s,
        "flush_to_all_done_s": done_s,
    }
    ok = (
        out["batches"] == 1
        and out["status"] == BatchStatus.CLOSED
        and out["item_count"] == n
        and out["digest_count"] == n
        and out["email_steps"] == 1
        and out["email_ok"] == 1
        and completed == n
    )
    out["ok"] = ok
    ctx.row(
        "27 gates",
        f"{n:,} arrivals at one key, flushed: batches / digest count / email steps",
        f"{out['batches']} / {out['digest_count']} / {out['email_steps']}",
        f"flush {flush_s * 1000:.0f} ms; all {n:,} completed in {done_s:.1f} s",
        f"1 / {n} / 1",
        "ok: one digest, N items" if ok else "WRONG",
    )
    ctx.target(
        DIGEST_TARGET,
        f"{out['batches']} batch, count {out['digest_count']}, {out['email_steps']} email",
        f"1 batch, count {n}, 1 email",
        ok=ok,
        note=f"{n:,} arrivals for one recipient and key {BATCH_KEY!r}; {completed:,} completed",
    )
    if not ok:
        raise RuntimeError(f"gates: the batch's digest is wrong: {out}")
    return out


def scenario_gates(ctx: Ctx) -> None:
    n = int(os.environ.get("BENCH_GATES_N") or (500 if ctx.quick else 10_000))
    wfs = {
        key: workflow_save(key=key, name=key, definition=definition, actor="bench")
        for key, definition in DEFINITIONS.items()
    }
    ctx.workflows.update(wfs)
    Recipient.objects.get_or_create(id=RECIPIENT, defaults={"email": "reader@example.com"})
    flush_broker()
    ref_n = max(1, n // 2)
    run = uuid.uuid4().hex[:6]
    out: dict[str, Any] = {"n": n, "reference_instances_per_part": ref_n}
    workers = ctx.procs.celery_workers(2, tag="gates", extra_env=WORKER_ENV)
    try:
        _phase(ctx, workers, wfs[REF_WF], WARMUP, f"warmup-{run}")
        ref1 = _phase(ctx, workers, wfs[REF_WF], ref_n, f"ref1-{run}")
        arrivals = _phase(
            ctx, workers, wfs[BATCH_WF], n, f"batch-{run}", recipient_id=RECIPIENT, steps=n
        )
        arrivals["first_last_fifth_steps_per_s"] = _fifths(wfs[BATCH_WF], arrivals["since"])
        out["digest"] = _flush_and_check(ctx, wfs[BATCH_WF], n, arrivals)
        ref2 = _phase(ctx, workers, wfs[REF_WF], ref_n, f"ref2-{run}")
        throttle = _phase(ctx, workers, wfs[THROTTLE_WF], n, f"throttle-{run}")
        ref3 = _phase(ctx, workers, wfs[REF_WF], ref_n, f"ref3-{run}")
    finally:
        ctx.procs.stop_workers(workers)
    flush_broker()
    out.update(
        arrivals=arrivals,
        throttle=throttle,
        reference_parts=[ref1, ref2, ref3],
        batch_reference=_combined(ref1, ref2),
        throttle_reference=_combined(ref2, ref3),
        throttled=StepExecutionLog.objects.filter(
            workflow=wfs[THROTTLE_WF], skip_reason="throttled"
        ).count(),
    )
    ctx.results["gates"] = out
    _report(ctx, out, n)


def _report(ctx: Ctx, out: dict[str, Any], n: int) -> None:
    lines = (
        (
            BATCH_TARGET,
            BATCH_RATIO,
            out["arrivals"],
            out["batch_reference"],
            f"{n:,} arrivals at one batch key (1 recipient), steps/s",
            "ref parts 1+2",
        ),
        (
            THROTTLE_TARGET,
            THROTTLE_RATIO,
            out["throttle"],
            out["throttle_reference"],
            f"{n:,} throttle passes (100 keys, limit 1000/1h), steps/s",
            "ref parts 2+3",
        ),
    )
    for name, ratio, app, ref, metric, parts in lines:
        rate, ref_rate = app["steps_per_s"], ref["steps_per_s"]
        cost = ref_rate / rate if rate else float("inf")
        ok = rate >= ref_rate / ratio
        ctx.row(
            "27 gates",
            metric,
            f"{rate:.0f}",
            f"{ref_rate:.0f} (delay_ms: 0 step, {parts}; {cost:.2f}x a plain step)",
            f">= ref / {ratio}",
            verdict(ok, f"{cost:.2f}x"),
        )
        ctx.row(
            "27 gates",
            "  same: CPU ms per step, worker + pg (reference)",
            f"{app['worker_cpu_ms_per_step']:.2f} + {app['pg_cpu_ms_per_step']:.2f}",
            f"{ref['worker_cpu_ms_per_step']:.2f} + {ref['pg_cpu_ms_per_step']:.2f}",
        )
        ctx.target(
            name,
            rate,
            ref_rate / ratio,
            "steps/s",
            ok,
            f"{cost:.2f}x a delay_ms: 0 step ({ref_rate:.0f} steps/s, same run, same 2 nodes); "
            f"worker CPU {app['worker_cpu_ms_per_step']:.2f} vs "
            f"{ref['worker_cpu_ms_per_step']:.2f} ms/step",
        )
    fifths = out["arrivals"]["first_last_fifth_steps_per_s"]
    if fifths:
        ctx.row(
            "27 gates",
            "  batch arrivals: steps/s of the first / last fifth (does the batch's size weigh?)",
            f"{fifths[0]:.0f} / {fifths[1]:.0f}",
        )
    if out["throttled"]:
        ctx.row("27 gates", "  throttle: passes skipped (expected 0)", str(out["throttled"]))
