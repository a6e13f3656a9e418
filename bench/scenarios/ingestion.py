"""Scenario 1, ingestion: POST /triggers/ throughput and latency, next to a plain
Django reference app."""

from __future__ import annotations

import uuid
from typing import Any

from bench.infra import free_port
from bench.scenarios.common import Ctx, combine, flush_broker, loadgen, verdict
from bench.scenarios.drain import close_out

# --- 1. ingestion ----------------------------------------------------------------------


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
        out[key] = combine(runs)
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
