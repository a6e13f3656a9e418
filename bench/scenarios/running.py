"""Scenario 6, running instances: events delivered to waiting instances (interest
overhead, fan-out, wake-up latency), next to the same rows written by hand."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from django.db import connection

from bench.infra import free_port
from bench.scenarios.common import (
    PAYLOAD,
    Ctx,
    combine,
    flush_broker,
    loadgen,
    ms,
    stats_s,
    verdict,
)
from bench.scenarios.drain import close_out, park, wait_terminal
from bench.scenarios.event_fanout import fanout, fanout_reference, post_json, profile_delivery
from executions.models import StepExecutionLog
from triggers.models import TriggerInstance


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
    out: dict[str, Any] = {k: combine(v) for k, v in raw.items()}
    from triggers.models.inbox import Interest

    wf = ctx.workflows["bench-interests"]
    made = TriggerInstance.objects.filter(workflow=wf).count()
    rows = Interest.objects.filter(instance__workflow=wf).count()
    if made == 0 or rows != 2 * made:
        raise RuntimeError(f"interest overhead: {rows} interest rows for {made} instances")
    out["interest_rows"] = rows
    for key in ("bench-interests", "bench-nointerests"):
        close_out(ctx.workflows[key])
    return out


def _wakeup_latency(ctx: Ctx, port: int, workers: list[Any]) -> dict[str, Any]:
    """Open loop, workers idle: an event to one parked instance (subject instance:<id>)
    every 1/rate s, and half-way between two of them a POST /triggers/ of a new instance
    of the same workflow (the reference: API -> first step started, same broker hop)."""
    from triggers.models.inbox import InboxEvent

    sz = ctx.sizes
    wf = ctx.workflows["bench-wakeup"]
    tag = uuid.uuid4().hex[:6]
    ids = park(wf, sz.wake_n, f"wake-{tag}", None)
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
                code, data = post_json(
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
                code, data = post_json(
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
    park(ctx.workflows["bench-fanout"], n, f"fan-{tag}", "campaign:1")
    park(ctx.workflows["bench-fanout-ref"], n, f"fanref-{tag}", "campaign:ref")
    park(ctx.workflows["bench-fanout-prof"], n, f"fanprof-{tag}", "campaign:prof")
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
        profile = profile_delivery(ctx, n)
        phase("delivery_profile")
        flush_broker()
        workers = ctx.procs.celery_workers(2, tag="running")
        phase("workers_start")
        ref = fanout_reference(ctx, n, workers)
        phase("fanout_reference")
        fan = fanout(ctx, port, n, workers)
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
