"""Runs one peer next to NotifyFlow's execution scenario: its own database on the same
PostgreSQL (dropped and created), ``setup``, a burst of N workflows enqueued before the
workers start (as NotifyFlow's preload), 2 worker processes, then an open-loop trickle
for enqueue -> done latency. Steps/s = step-log rows / (first start -> last finish)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import psycopg

from bench.costs import Meter
from bench.infra import PG_HOST, PG_PORT, ROOT, Procs, bench_env, raise_if_any_died
from bench.loadgen import percentile

# Tuned for throughput on this machine (bench/README.md "Peers"): best found of the
# settings their docs offer, alternating trials of 2,000 workflows on this (noisy) machine.
# procrastinate: concurrency 4 per process (async tasks; 2 and 8 were slower), finished
# jobs deleted (the step-log row is the record; keeps the job table small), polling every
# 0.05 s with LISTEN/NOTIFY off (with it: 144-182 steps/s; without: 188-255).
# DBOS: worker_concurrency 16 per executor (one executor_id per process), queue polling
# 0.05 s (default 1 s).
PEERS: dict[str, dict[str, Any]] = {
    "dbos": {
        "module": "bench.peers.dbos_peer",
        "import": "dbos",
        "label": "DBOS Transact",
        "worker_args": ["--concurrency", "16", "--poll", "0.05"],
    },
    "procrastinate": {
        "module": "bench.peers.procrastinate_peer",
        "import": "procrastinate",
        "label": "procrastinate",
        "worker_args": [
            "--concurrency",
            "4",
            "--poll",
            "0.05",
            "--delete-jobs",
            "successful",
            "--no-listen",
        ],
    },
}


def version(name: str) -> str | None:
    """The installed version, or None when the peer cannot be imported."""
    try:
        from importlib.metadata import version as dist_version

        __import__(PEERS[name]["import"])
        return dist_version(PEERS[name]["import"])
    except Exception:  # noqa: BLE001 - any failure means "skip this peer"
        return None


def _url(db: str) -> str:
    return f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{db}"


def _recreate(db: str) -> None:
    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')


def _cli(module: str, *args: str, timeout: float) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        output = done.stdout[-2000:] + done.stderr[-2000:]
        raise RuntimeError(f"{module} {args[0]} failed:\n{output}")


def _steps(db: str, prefix: str) -> dict[str, Any]:
    with psycopg.connect(_url(db), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), extract(epoch FROM max(finished_at) - min(started_at)) "
            "FROM peer_steplog WHERE workflow_id LIKE %s",
            [prefix + "-%"],
        ).fetchone()
    count, span = int(row[0]), float(row[1] or 0.0)
    return {"steps": count, "span_s": span, "steps_per_s": count / span if span else 0.0}


def _latencies(db: str, prefix: str) -> list[float]:
    with psycopg.connect(_url(db), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM finished_at) - enqueued_at FROM peer_steplog "
            "WHERE workflow_id LIKE %s AND node_id = 'e2'",
            [prefix + "-%"],
        ).fetchall()
    return [float(r[0]) for r in rows]


def _wait_steps(db: str, prefix: str, want: int, timeout_s: float, workers: list[Any]) -> None:
    deadline = time.monotonic() + timeout_s
    got = 0
    while time.monotonic() < deadline:
        got = _steps(db, prefix)["steps"]
        if got >= want:
            return
        raise_if_any_died(workers)
        time.sleep(0.25)
    raise RuntimeError(f"peer: {got}/{want} steps in {timeout_s:.0f} s")


def run_peer(
    procs: Procs,
    name: str,
    db: str,
    n: int,
    latency_n: int,
    latency_rate: float,
    timeout_s: float,
    bg: dict[str, float],
) -> dict[str, Any]:
    spec = PEERS[name]
    module = spec["module"]
    url = _url(db)
    _recreate(db)
    _cli(module, "setup", "--db", url, timeout=120)
    t0 = time.monotonic()
    _cli(module, "enqueue", "--db", url, "--n", str(n), "--prefix", "burst", timeout=timeout_s)
    enqueue_s = time.monotonic() - t0
    marker_dir = procs.run_dir / f"markers-peer-{name}"
    marker_dir.mkdir(parents=True, exist_ok=True)
    for old in marker_dir.iterdir():
        old.unlink()
    env = bench_env(BENCH_MARKER_DIR=str(marker_dir))
    workers = [
        procs.start(
            f"peer-{name}-{i}",
            [sys.executable, "-m", module, "worker", "--db", url, "--name", f"w{i}"]
            + spec["worker_args"],
            env,
        )
        for i in (1, 2)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(marker_dir.glob("ready-*"))) < 2:
            for w in workers:
                if not w.alive():
                    raise RuntimeError(f"{w.name} exited:\n{w.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"peer {name}: workers not ready in 60 s")
            time.sleep(0.05)
        steps_sql = ("SELECT count(*) FROM peer_steplog WHERE workflow_id LIKE 'burst-%%'", [])
        meter = Meter(db, [w.pid for w in workers], bg, steps_sql)  # no Redis: not used
        meter.start()
        _wait_steps(db, "burst", 3 * n, timeout_s, workers)
        cost = meter.stop()
        rate = _steps(db, "burst")
        # Open loop: enqueue -> last step finished, at a rate far below capacity.
        _cli(
            module,
            "enqueue",
            "--db",
            url,
            "--n",
            str(latency_n),
            "--rate",
            str(latency_rate),
            "--prefix",
            "lat",
            timeout=latency_n / latency_rate + 120,
        )
        _wait_steps(db, "lat", 3 * latency_n, timeout_s, workers)
        lat = _latencies(db, "lat")
    finally:
        for w in workers:
            procs.stop(w, timeout=20)
    return {
        "peer": name,
        "version": version(name),
        "workflows": n,
        "enqueue_s": enqueue_s,
        "worker_args": spec["worker_args"],
        "processes": 2,
        "rate": rate,
        "cost": cost,
        "latency": {
            "workflows": latency_n,
            "per_s": latency_rate,
            "p50": percentile(lat, 50),
            "p99": percentile(lat, 99),
            "n": len(lat),
        },
    }
