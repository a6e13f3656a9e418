"""The capacity model of bench/SCALING.md, computed from a run's JSON:
``python -m bench.scaling [var/bench/latest-full.json]``.

Inputs are the per-step costs scenario 2 measured (bench/costs.py). Everything this
prints beyond those inputs is a **projection**: linear in cores, at a utilisation
ceiling (default 70 %), with no allowance for lock or WAL-insert contention, which grows
with cores. Redis and disk ceilings are assumptions, named as such."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

UTIL = 0.70
REDIS_CMDS_PER_S = 100_000  # fallback when the run has no Redis CPU per command
WAL_MB_PER_S = 200  # assumption: sustained sequential write of a modest SSD volume


def _costs(execution: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {"NotifyFlow": {**execution["cost"], "rate": execution["rate"]["steps_per_s"]}}
    for key, label in (
        ("noop_reference", "no-op task"),
        ("relay_reference", "relay"),
        ("durable_reference", "minimal durable step"),
    ):
        ref = execution[key]
        out[label] = {**ref["cost"], "rate": ref["tasks_per_s"]}
    for name, peer in execution.get("peers", {}).items():
        if "cost" in peer:
            out[f"{name} {peer['version']}"] = {**peer["cost"], "rate": peer["rate"]["steps_per_s"]}
    return out


def redis_capacity(rows: dict[str, dict[str, Any]]) -> tuple[float, str]:
    """Commands/s one Redis core sustains at 100 %: from the run's Redis CPU per command
    (INFO cpu / commandstats, server-wide, during the Celery drains), else the fallback."""
    per_cmd = [
        c["redis_server_cpu_us_per_cmd"]
        for c in rows.values()
        if c.get("redis_server_cpu_us_per_cmd") and c.get("redis_cmds_per_step")
    ]
    if per_cmd:
        us = sorted(per_cmd)[len(per_cmd) // 2]
        return 1e6 / us, f"measured: {us:.1f} us of Redis CPU per command (median of drains)"
    return float(REDIS_CMDS_PER_S), "assumed"


def model(report: dict[str, Any], util: float = UTIL) -> str:
    execution = report["results"]["execution"]
    rows = _costs(execution)
    redis_cap, redis_src = redis_capacity(rows)
    lines = [
        f"run {report['started']} ({report['mode']}, {execution['instances']} x 3 steps), "
        f"{report['machine'].get('nproc')} cores, PostgreSQL {report['machine'].get('postgresql')}",
        "",
        "## Measured per step (this run)",
        "",
        "| what | steps/s (2 worker procs) | worker CPU ms | PostgreSQL CPU ms | xacts | rows "
        "written | WAL bytes | Redis cmds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, c in rows.items():
        lines.append(
            f"| {label} | {c['rate']:.0f} | {c['worker_cpu_ms_per_step']:.2f} | "
            f"{c['pg_cpu_ms_per_step']:.2f} | {c['xacts_per_step']:.1f} | "
            f"{c['rows_written_per_step']:.1f} | {c['wal_bytes_per_step']:.0f} | "
            f"{c['redis_cmds_per_step']:.1f} |"
        )
    lines += [
        "",
        f"## Projection: steps/s at {util:.0%} CPU, linear in cores (not measured)",
        "",
        "| what | per worker core | PostgreSQL 4 cores | 8 cores | 16 cores | 32 cores | "
        "worker cores to feed 16 PG cores | WAL MB/s at 16 cores | Redis share at 16 cores |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, c in rows.items():
        w, p = c["worker_cpu_ms_per_step"], c["pg_cpu_ms_per_step"]
        per_worker = util * 1000 / w if w else 0.0
        pg = {n: (util * n * 1000 / p if p else float("inf")) for n in (4, 8, 16, 32)}
        feed = pg[16] / per_worker if per_worker and p else 0.0
        wal = pg[16] * c["wal_bytes_per_step"] / 1e6 if p else 0.0
        redis = pg[16] * c["redis_cmds_per_step"] / redis_cap if p else 0.0

        def fmt(x: float) -> str:
            return "-" if x == float("inf") else f"{x:,.0f}"

        lines.append(
            f"| {label} | {per_worker:,.0f} | {fmt(pg[4])} | {fmt(pg[8])} | {fmt(pg[16])} | "
            f"{fmt(pg[32])} | {feed:.0f} | {wal:.1f} | {redis:.0%} |"
        )
    lines += [
        "",
        f"Redis share = the load on one Redis core: {redis_cap:,.0f} cmds/s at 100 % "
        f"({redis_src}). WAL disk assumed {WAL_MB_PER_S} MB/s sustained. PostgreSQL CPU is "
        "the only database limit counted.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("report", nargs="?", default="var/bench/latest-full.json")
    parser.add_argument("--util", type=float, default=UTIL)
    args = parser.parse_args()
    print(model(json.loads(Path(args.report).read_text()), args.util))


if __name__ == "__main__":
    main()
