"""Run the NotifyFlow benchmarks: ``python -m bench.run [--quick] [--only NAME ...]``.

Creates its own PostgreSQL database and uses its own Redis db (flushed), starts the
gunicorn and celery processes it needs, stops them all (also on error), prints a table
and writes var/bench/bench-{quick,full}-<time>.json. Exits non-zero only on real errors;
speed figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCENARIOS = [
    "ingestion",
    "bulk",
    "execution",
    "delay",
    "profile",
    "cost",
    "hold",
    "running",
    "preferences",
    "people",
    "gates",
    "lanes",
    "feed",
    "status_webhooks",
    "push",
    "push_fanout",
    "digests",
    "translations",
    "backlog",
]


def _scenario(scenarios: Any, name: str) -> Any:
    """The scenario function of ``name`` (bench/scenarios/<name>.py)."""
    return getattr(scenarios, {"hold": "scenario_hold_and_rss"}.get(name, f"scenario_{name}"))


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import celery
    import django
    import rest_framework

    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "drf": rest_framework.VERSION,
        "celery": celery.__version__,
        "platform": platform.platform(),
    }
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
        info["memory_gib"] = round(int(mem) / 1024 / 1024, 1)
    except (OSError, IndexError, ValueError):
        pass
    try:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("SHOW server_version")
            info["postgresql"] = cur.fetchone()[0]
            # One fsync'd commit: every commit a step or a POST makes pays this.
            cur.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (id serial PRIMARY KEY)")
            t0 = time.perf_counter()
            for _ in range(200):
                cur.execute("INSERT INTO bench_commit_probe DEFAULT VALUES")
            info["pg_commit_ms"] = round((time.perf_counter() - t0) / 200 * 1000, 3)
            cur.execute("DROP TABLE bench_commit_probe")
        from bench.infra import redis_client

        info["redis"] = redis_client().info("server")["redis_version"]
    except Exception as exc:  # noqa: BLE001 - informational only
        info["versions_error"] = repr(exc)
    return info


def print_table(rows: list[Any]) -> str:
    header = ("scenario", "metric", "value", "reference (same run)", "target", "verdict")
    data = [header] + [
        (r.scenario, r.metric, r.value, r.reference, r.target, r.verdict) for r in rows
    ]
    widths = [max(len(str(row[i])) for row in data) for i in range(len(header))]
    lines = [
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in data
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def print_verdicts(ctx: Any, expected: list[str]) -> str:
    """The final verdict table: every target of issue 14, measured in this run (or
    "not run"). Printed, never asserted."""
    from bench.scenarios import Target

    seen = {t.name for t in ctx.targets}
    rows = list(ctx.targets) + [
        Target(name, "-", "-", "not run", "scenario not selected / not hooked in")
        for name in expected
        if name not in seen
    ]
    order = {name: i for i, name in enumerate(expected)}
    rows.sort(key=lambda t: order.get(t.name, len(order)))
    header = ("target", "measured", "target value", "verdict", "note")
    data = [header] + [(t.name, t.measured, t.target, t.verdict, t.note) for t in rows]
    widths = [max(len(str(row[i])) for row in data) for i in range(len(header))]
    lines = [
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in data
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    met = sum(t.verdict == "met" for t in rows)
    missed = sum(t.verdict == "MISSED" for t in rows)
    text = "\n".join(lines) + f"\n{met} met, {missed} MISSED, {len(rows) - met - missed} not run"
    print("\nVerdicts (the targets, as the latest issue sets them; all from this run):", flush=True)
    print(text, flush=True)
    return text


def _take_lock(name: str, timeout_s: float) -> Any:
    """An exclusive lock per bench database, held for the life of the process."""
    import fcntl

    handle = open(f"/tmp/{name}.bench.lock", "w")  # noqa: SIM115 - held until exit
    deadline = time.monotonic() + timeout_s
    announced = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"another bench run holds {name} for over {timeout_s:.0f} s"
                ) from None
            if not announced:
                print(f"waiting for another bench run using {name} ...", flush=True)
                announced = True
            time.sleep(2)


def _raise_on_term(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _vacuum_if_autovacuum_is_off() -> None:
    """Between scenarios, what autovacuum would have done: the product needs it on
    (docs/operations.md, "The database"; ``check --deploy`` warns), and a server with it
    off left the next scenario to run on the last one's dead rows (the delay scenario
    after the execution scenario: p99 0.9 s against 0.15 s alone, issue 44)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        if cursor.fetchone()[0] == "on":
            return
        started = time.monotonic()
        cursor.execute("VACUUM (ANALYZE)")
    print(f"   (autovacuum is off: VACUUM ANALYZE, {time.monotonic() - started:.1f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--only", nargs="*", choices=SCENARIOS, help="run only these")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="quick mode: run the peers (DBOS, procrastinate) too (full runs always do)",
    )
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="full mode without the peers (execution at sizes the peers take an hour for)",
    )
    args = parser.parse_args(argv)
    selected = args.only or SCENARIOS
    mode = "quick" if args.quick else "full"
    # Quick and full runs use different databases and Redis dbs, so a CI smoke run on
    # the same machine never drops a full run's database; runs of one kind take turns.
    os.environ.setdefault(
        "BENCH_DB_NAME", "notifyflow_bench_quick" if args.quick else "notifyflow_bench"
    )
    os.environ.setdefault("BENCH_REDIS_DB", "10" if args.quick else "9")
    from bench.infra import (
        BROKER_URL,
        DB_NAME,
        OUT_DIR,
        REDIS_DB,
        Procs,
        bench_env,
        manage,
        recreate_database,
    )

    lock = _take_lock(DB_NAME, timeout_s=45 * 60)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = OUT_DIR / "runs" / f"{mode}-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _raise_on_term)

    os.environ.update(bench_env())
    started = time.monotonic()
    broker = BROKER_URL.split("@")[-1] if BROKER_URL.startswith("amqp") else f"redis db {REDIS_DB}"
    print(f"bench ({mode}): database {DB_NAME}, broker {broker}, logs in {run_dir}", flush=True)
    recreate_database()
    manage("migrate", "--noinput")

    import django

    django.setup()
    from bench import scenarios

    scenarios.flush_broker()
    procs = Procs(run_dir)
    ctx = None
    error: str | None = None
    timings: dict[str, float] = {}
    churn: dict[str, float] = {}
    loadavg: dict[str, float] = {}
    try:
        ctx = scenarios.setup(
            procs, quick=args.quick, peers=args.peers or not (args.quick or args.no_peers)
        )
        for name in SCENARIOS:
            if name not in selected:
                continue
            print(f"== {name}", flush=True)
            fn = _scenario(scenarios, name)
            t0, churn0 = time.monotonic(), procs.churn_s
            loadavg[name] = round(os.getloadavg()[0], 2)
            fn(ctx)
            timings[name] = round(time.monotonic() - t0, 1)
            churn[name] = round(procs.churn_s - churn0, 1)
            print(
                f"   ({timings[name]} s, {churn[name]} s of it starting and stopping processes)",
                flush=True,
            )
            _vacuum_if_autovacuum_is_off()
    except BaseException as exc:  # noqa: BLE001 - reported, then exit non-zero
        error = f"{exc.__class__.__name__}: {exc}"
        traceback.print_exc()
    finally:
        procs.stop_all()
    try:
        scenarios.flush_broker()
    except Exception:  # noqa: BLE001
        pass

    info = machine()
    print(
        f"\nNotifyFlow bench ({mode}), {info.get('nproc')} cores, "
        f"{info.get('memory_gib')} GiB, PostgreSQL {info.get('postgresql')}, "
        f"Redis {info.get('redis')}, Python {info['python']}, Django {info['django']}, "
        f"Celery {info['celery']}; one-row INSERT+commit {info.get('pg_commit_ms')} ms"
    )
    table = print_table(ctx.rows) if ctx else ""
    if ctx:
        scenarios.derive_targets(ctx)
    verdicts = print_verdicts(ctx, scenarios.EXPECTED_TARGETS) if ctx else ""
    total = round(time.monotonic() - started, 1)
    print(f"total {total} s", flush=True)
    for note in scenarios.DISTURBANCES:
        print(f"disturbed: {note}", flush=True)
    report = {
        "mode": mode,
        "started": stamp,
        "total_s": total,
        "scenario_s": timings,
        "scenario_churn_s": churn,
        "loadavg_1min_at_start": loadavg,
        "machine": info,
        "error": error,
        "rows": [r.__dict__ for r in ctx.rows] if ctx else [],
        "results": ctx.results if ctx else {},
        "table": table,
        "targets": [t.__dict__ for t in ctx.targets] if ctx else [],
        "verdicts": verdicts,
        "disturbances": scenarios.DISTURBANCES,
    }
    out = OUT_DIR / f"bench-{mode}-{stamp}.json"
    out.write_text(json.dumps(report, indent=2, default=str))
    (OUT_DIR / f"latest-{mode}.json").write_text(out.read_text())
    print(f"wrote {out}", flush=True)
    lock.close()
    if error:
        print(f"bench FAILED: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
