"""Engine probe (issue 14): the execution drain, alternated with the no-op reference,
with per-step costs the bench table does not show.

``python -m bench.engine_probe [--rounds 3] [--n 1500] [--noop 4000] [--reuse] [--spy S]``

Per round: the no-op reference (same worker command, 2 x ``-P solo``), then ``n``
3-node instances (email -> sms -> email) drained by 2 worker nodes. Reported per round:
steps/s and its ratio to the same round's no-op rate; worker CPU ms per step (both
nodes, /proc); PostgreSQL CPU ms per step (the backends connected to the bench
database, /proc); transactions and WAL bytes per step (pg_stat_database,
pg_current_wal_lsn: the WAL figure includes other databases' writes on a shared server);
and the 1-minute load average. ``--spy S`` runs py-spy on worker 1 for S seconds in the
last round. Uses the bench's own database and Redis db (BENCH_DB_NAME / BENCH_REDIS_DB).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def _cpu_ms(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * 1000.0 / ticks


def _db_counters(cur: Any, db: str) -> dict[str, float]:
    cur.execute(
        "SELECT xact_commit, tup_inserted, tup_updated, pg_current_wal_lsn() - '0/0'::pg_lsn"
        " FROM pg_stat_database WHERE datname = %s",
        [db],
    )
    commits, ins, upd, wal = cur.fetchone()
    cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [db])
    pids = [r[0] for r in cur.fetchall()]
    return {
        "commits": commits,
        "ins": ins,
        "upd": upd,
        "wal": float(wal),
        "pg_cpu": {pid: _cpu_ms(pid) for pid in pids},
    }


def _noop(ctx: Any, procs: Any, n: int, r: int) -> dict[str, Any]:
    """``bench.scenarios.execution``'s noop reference plus the workers' CPU per task."""
    from bench import scenarios
    from bench.infra import broker_backlog
    from bench.reference_app.tasks import noop
    from notifyflow.celery import app as celery_app

    scenarios.flush_broker()
    with celery_app.producer_or_acquire() as producer:
        for _ in range(n):
            noop.apply_async(producer=producer)
    workers = procs.celery_workers(2, tag=f"noop{r}")
    cpu0 = {p.pid: _cpu_ms(p.pid) for p in workers}
    while True:
        backlog = broker_backlog()
        if backlog["ready"] == 0 and backlog["unacked"] == 0:
            break
        time.sleep(0.05)
    cpu = sum(_cpu_ms(p) - ms for p, ms in cpu0.items())
    stats = procs.stop_workers(workers)
    count = sum(s["count"] for s in stats)
    firsts = [s["first"] for s in stats if s["count"]]
    lasts = [s["last"] for s in stats if s["count"]]
    span = max(lasts) - min(firsts) if firsts else 0.0
    return {
        "tasks_per_s": count / span if span else 0.0,
        "cpu_ms_per_task": round(cpu / count, 3) if count else 0.0,
    }


def _inproc(wf: Any, n: int) -> dict[str, Any]:
    """``n`` 3-node instances stepped in this process as a worker would (asynchronous
    commit session, successor published to the broker): wall and CPU per step of this
    process and of its PostgreSQL backend, statements per step (an execute wrapper)."""
    from django.db import connection

    from bench import scenarios
    from executions import engine

    scenarios.flush_broker()
    ids = scenarios.preload(wf, n, f"inproc-{uuid.uuid4().hex[:6]}")
    scenarios.flush_broker()
    with connection.cursor() as cur:
        cur.execute("SET synchronous_commit TO off")
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
    pg0, cpu0, t0 = _cpu_ms(backend), time.process_time(), time.perf_counter()
    count = [0]

    def counting(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        count[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counting):
        for _ in range(3):
            for instance_id in ids:
                engine.step_execute(instance_id=instance_id, worker="probe")
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    pg = _cpu_ms(backend) - pg0
    steps = 3 * n
    with connection.cursor() as cur:
        cur.execute("SET synchronous_commit TO on")
    scenarios.flush_broker()
    return {
        "inproc_steps": steps,
        "wall_ms_per_step": round(wall * 1000 / steps, 3),
        "cpu_ms_per_step": round(cpu * 1000 / steps, 3),
        "pg_cpu_ms_per_step": round(pg / steps, 3),
        "queries_per_step": round(count[0] / steps, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=1500, help="3-node instances per round")
    parser.add_argument("--noop", type=int, default=4000, help="no-op tasks per round")
    parser.add_argument("--reuse", action="store_true", help="keep the database")
    parser.add_argument("--spy", type=float, default=0.0, help="py-spy seconds (last round)")
    parser.add_argument("--tag", default="", help="label for the output file")
    parser.add_argument(
        "--inproc", type=int, default=0, help="also: this many instances stepped in-process"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("BENCH_DB_NAME", "notifyflow_bench_h3")
    os.environ.setdefault("BENCH_REDIS_DB", "14")
    from bench.infra import DB_NAME, OUT_DIR, Procs, bench_env, manage, recreate_database

    run_dir = OUT_DIR / "runs" / f"probe-{time.strftime('%Y%m%dT%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(bench_env())
    if not args.reuse:
        recreate_database()
    manage("migrate", "--noinput")
    import django

    django.setup()
    from django.db import connection
    from django.utils import timezone

    from bench import scenarios
    from bench.scenarios import profile
    from bench.scenarios.drain import close_out, step_rate, wait_terminal

    procs = Procs(run_dir)
    rounds: list[dict[str, Any]] = []
    try:
        ctx = scenarios.setup(procs, quick=True)
        ctx.sizes.noop_n = args.noop
        ctx.sizes.drain_timeout_s = 600
        wf = ctx.workflows["bench-exec"]
        if args.inproc:
            for _ in range(3):
                print(json.dumps(_inproc(wf, args.inproc)), flush=True)
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            ref = _noop(ctx, procs, args.noop, r)
            scenarios.flush_broker()
            since = timezone.now()
            scenarios.preload(wf, args.n, f"probe-{uuid.uuid4().hex[:6]}")
            with connection.cursor() as cur:
                before = _db_counters(cur, DB_NAME)
            workers = procs.celery_workers(2, tag=f"probe{r}")
            cpu0 = {p.pid: _cpu_ms(p.pid) for p in workers}
            try:
                if args.spy and r == args.rounds - 1:
                    time.sleep(0.5)
                    raw = run_dir / "worker.collapsed.txt"
                    if profile.py_spy(workers[0].pid, args.spy, raw):
                        profile.summarize_collapsed(raw, run_dir / "worker.top.txt")
                wait_terminal(wf, args.n, 600, since=since, procs=workers, poll_s=0.1)
                cpu1 = {p.pid: _cpu_ms(p.pid) for p in workers}
                with connection.cursor() as cur:
                    after = _db_counters(cur, DB_NAME)
            finally:
                procs.stop_workers(workers)
            rate = step_rate(wf, since)
            steps = rate["steps"] or 1
            pg_ms = sum(
                after["pg_cpu"].get(pid, 0.0) - ms
                for pid, ms in before["pg_cpu"].items()
                if pid in after["pg_cpu"]
            ) + sum(ms for pid, ms in after["pg_cpu"].items() if pid not in before["pg_cpu"])
            row = {
                "round": r,
                "load1": round(load, 2),
                "noop_per_s": round(ref["tasks_per_s"], 1),
                "noop_cpu_ms": ref["cpu_ms_per_task"],
                "steps_per_s": round(rate["steps_per_s"], 1),
                "ratio": round(rate["steps_per_s"] / ref["tasks_per_s"], 4)
                if ref["tasks_per_s"]
                else 0,
                "worker_cpu_ms_per_step": round(sum(cpu1[p] - cpu0[p] for p in cpu0) / steps, 3),
                "pg_cpu_ms_per_step": round(pg_ms / steps, 3),
                "xacts_per_step": round((after["commits"] - before["commits"]) / steps, 2),
                "tup_ins_per_step": round((after["ins"] - before["ins"]) / steps, 2),
                "tup_upd_per_step": round((after["upd"] - before["upd"]) / steps, 2),
                "wal_bytes_per_step": round((after["wal"] - before["wal"]) / steps),
            }
            rounds.append(row)
            print(json.dumps(row), flush=True)
            close_out(wf)
    finally:
        procs.stop_all()
        try:
            scenarios.flush_broker()
        except Exception:  # noqa: BLE001
            pass
    keys = ["steps_per_s", "ratio", "worker_cpu_ms_per_step", "pg_cpu_ms_per_step"]
    summary = {k: sorted(r[k] for r in rounds)[len(rounds) // 2] for k in keys if rounds}
    print("median", json.dumps(summary), flush=True)
    out = OUT_DIR / f"probe-{args.tag or 'run'}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps({"rounds": rounds, "median": summary}, indent=2))
    print(f"wrote {out} (logs {run_dir})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
