"""Scenario "bulk": ``POST /api/v1/triggers/bulk/`` with 1,000-item requests through
gunicorn (same process layout as scenario 1), then every created instance drained by
the workers.

triggers/s = created triggers / wall time of the rounds, client concurrency = the
gunicorn workers (2). Reference in the same run: ``bench.reference_app``'s bulk view,
one ``bulk_create(ignore_conflicts=True)`` of the same items on a same-shape table in its
own gunicorn (no per-item validation, audit, interests or publish): the floor. Rounds
alternate reference and app. No worker runs while the requests are timed (as in #1);
then two worker nodes drain what was created, and the scenario fails if any instance
does not finish.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from typing import Any

from django.utils import timezone

from bench.infra import free_port
from bench.loadgen import percentile
from bench.scenarios.common import (
    BULK_TARGET,
    BULK_TARGET_RATE,
    EMAIL,
    PAYLOAD,
    Ctx,
    chain,
    flush_broker,
    verdict,
)
from bench.scenarios.drain import close_out, wait_terminal
from workflows.services import workflow_save

ITEMS = 1000
WORKFLOW = "bench-bulk"


def _bodies(prefix: str, requests: int) -> list[bytes]:
    """Request bodies built before the clock starts (the client's JSON costs nothing)."""
    return [
        json.dumps(
            {
                "items": [
                    {
                        "workflow": WORKFLOW,
                        "idempotency_key": f"{prefix}-{r}-{i}",
                        "payload": {**PAYLOAD, "email": f"user{i}@example.com"},
                    }
                    for i in range(ITEMS)
                ]
            }
        ).encode()
        for r in range(requests)
    ]


def _post_all(port: int, path: str, token: str, bodies: list[bytes], concurrency: int) -> dict:
    """POST ``bodies`` with ``concurrency`` threads; triggers/s over the wall time."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    queue = list(reversed(bodies))
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    outcomes: dict[str, int] = {}

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body, headers)
                resp = conn.getresponse()
                data = resp.read()
            finally:
                conn.close()
            elapsed = time.perf_counter() - t0
            counted: dict[str, int] = {}
            if resp.status == 200:
                for result in json.loads(data)["results"]:
                    status = result.get("status", "ok")
                    counted[status] = counted.get(status, 0) + 1
            with lock:
                latencies.append(elapsed)
                statuses[str(resp.status)] = statuses.get(str(resp.status), 0) + 1
                for key, count in counted.items():
                    outcomes[key] = outcomes.get(key, 0) + count

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ok = statuses.get("200", 0)
    return {
        "requests": len(bodies),
        "statuses": statuses,
        "outcomes": outcomes,
        "wall_s": wall,
        "triggers_per_s": ok * ITEMS / wall if wall else 0.0,
        "p50_ms": percentile(latencies, 50) * 1000,
        "max_ms": max(latencies, default=0.0) * 1000,
    }


def _combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    wall = sum(r["wall_s"] for r in runs)
    ok = sum(r["statuses"].get("200", 0) for r in runs)
    outcomes: dict[str, int] = {}
    for r in runs:
        for key, count in r["outcomes"].items():
            outcomes[key] = outcomes.get(key, 0) + count
    return {
        "rounds": runs,
        "requests_ok": ok,
        "outcomes": outcomes,
        "wall_s": wall,
        "triggers_per_s": ok * ITEMS / wall if wall else 0.0,
    }


def scenario_bulk(ctx: Ctx) -> None:
    rounds, per_round, warmups = (1, 2, 0) if ctx.quick else (3, 10, 1)
    wf = ctx.workflows.get(WORKFLOW) or workflow_save(
        key=WORKFLOW, name=WORKFLOW, definition=chain([("e1", "email", EMAIL)]), actor="bench"
    )
    ctx.workflows[WORKFLOW] = wf
    flush_broker()
    run_id = uuid.uuid4().hex[:6]
    since = timezone.now()
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 1)
        mark = now

    app_port, ref_port = free_port(), free_port()
    ref = ctx.procs.gunicorn("gunicorn-bulk-reference", ref_port, workers=2)
    app = ctx.procs.gunicorn("gunicorn-bulk-app", app_port, workers=2)
    raw: dict[str, list[dict[str, Any]]] = {"reference": [], "app": []}
    phase("gunicorn_start")
    try:
        # One warm-up request each (first-request imports, caches), not timed; not in
        # quick mode, where every instance costs drain time (~250 steps/s here).
        for name, port, path in (
            ("reference", ref_port, "/bench/ref/triggers/bulk/"),
            ("app", app_port, "/api/v1/triggers/bulk/"),
        ):
            for _ in range(warmups):
                _post_all(port, path, ctx.token, _bodies(f"{name}-warm-{run_id}", 1), 1)
        for rnd in range(rounds):
            for name, port, path in (
                ("reference", ref_port, "/bench/ref/triggers/bulk/"),
                ("app", app_port, "/api/v1/triggers/bulk/"),
            ):
                bodies = _bodies(f"{name}-{run_id}-{rnd}", per_round)
                res = _post_all(port, path, ctx.token, bodies, concurrency=2)
                if res["statuses"].get("200", 0) != per_round:
                    raise RuntimeError(f"bulk {name}: not every request succeeded: {res}")
                raw[name].append(res)
        phase("requests")
    finally:
        ctx.procs.stop(app)
        ctx.procs.stop(ref)
    phase("gunicorn_stop")
    out: dict[str, Any] = {name: _combine(runs) for name, runs in raw.items()}
    created = out["app"]["outcomes"].get("created", 0)
    expected = rounds * per_round * ITEMS
    if created != expected:
        raise RuntimeError(f"bulk: {created} of {expected} items created: {out['app']}")
    # Every created instance runs: two worker nodes drain them (+ the warm-up's).
    workers = ctx.procs.celery_workers(2, tag="bulk")
    phase("workers_start")
    try:
        finished = wait_terminal(
            wf, expected + warmups * ITEMS, ctx.sizes.drain_timeout_s, since=since, procs=workers
        )
        phase("drain")
    finally:
        ctx.procs.stop_workers(workers)
    phase("workers_stop")
    out["drain"] = finished
    out["phase_s"] = phases
    close_out(wf)
    flush_broker()
    ctx.results["bulk"] = out
    a, r = out["app"]["triggers_per_s"], out["reference"]["triggers_per_s"]
    ctx.row(
        "7 bulk",
        f"POST /triggers/bulk/ triggers/s ({ITEMS}/request, 2 clients)",
        f"{a:.0f}",
        f"{r:.0f} (bare DRF bulk_create, {a / r:.0%})" if r else "",
        f">= {BULK_TARGET_RATE:.0f}",
        verdict(a >= BULK_TARGET_RATE),
    )
    ctx.target(
        BULK_TARGET,
        a,
        BULK_TARGET_RATE,
        "triggers/s",
        a >= BULK_TARGET_RATE,
        f"{a / r:.0%} of bare DRF bulk_create ({r:.0f}/s); {finished['failed']} of "
        f"{finished['finished'] + finished['failed']} instances failed"
        if r
        else "",
    )
    p50 = percentile([x["p50_ms"] for x in out["app"]["rounds"]], 50)
    ctx.row("7 bulk", "request p50 (1,000 items)", f"{p50:.0f} ms")
    ctx.row(
        "7 bulk",
        "created instances drained by 2 worker nodes",
        f"{finished['finished']} finished, {finished['failed']} failed",
        "",
        "all finish",
        verdict(finished["failed"] == 0),
    )
