"""Per-step costs of a drain, measured from outside the processes doing the work.

A ``Meter`` runs while some worker processes drain steps against one database and
reports, per step:

- worker CPU ms: utime + stime of the given worker processes (and their children) from
  /proc/<pid>/stat;
- PostgreSQL CPU ms: the same for every backend connected to the run's database
  (``pg_stat_activity.datname``), sampled every 0.25 s so a backend that exits mid-run is
  counted up to its last sample;
- transactions and rows written: ``pg_stat_database`` of the run's database (PostgreSQL
  15 flushes backend counters at most once a second and idle backends within ~10 s, so
  these lag by up to ~1 s of work at each end);
- WAL bytes: ``pg_waldump`` of the WAL written during the first ``WAL_WINDOW_S`` of the
  drain, keeping the records that touch a relation of the run's database (plus the
  commit records of their transactions), divided by the steps done in that window; read
  right away, before a checkpoint can recycle the segments. The server-wide
  ``pg_current_wal_lsn()`` difference (other databases on the shared server included) is
  kept next to it. Needs read access to the data directory (root in this container);
  without it only the server-wide figure is reported;
- Redis commands: ``MONITOR`` for ``MONITOR_S`` seconds early in the drain, counting the
  commands on the run's Redis db, divided by the messages delivered in that window
  (kombu's ``HSET unacked``: one per message consumed). Server-wide ``INFO
  commandstats`` differences are kept next to it.

No restart, no extension, no superuser setting: it reads what any PostgreSQL 15 and
Redis 7 expose. Numbers are per *step* = steps recorded by the drain during the window.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.infra import PG_HOST, PG_PORT, child_pids, redis_client

TICK = os.sysconf("SC_CLK_TCK")
WAL_WINDOW_S = 20.0
MONITOR_S = 1.5
PG_BIN = Path("/usr/lib/postgresql/15/bin")
_WAL_LINE = re.compile(r"len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+), lsn: ([0-9A-F]+/[0-9A-F]+)")


def cpu_s(pid: int) -> float | None:
    """utime + stime of one process, seconds (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _pg() -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", dbname="postgres", autocommit=True
    )


def _wal_lsn(cur: Any) -> int:
    # The flush position: everything before it is in the segment files pg_waldump reads.
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::bigint")
    return int(cur.fetchone()[0])


def _redis_calls() -> dict[str, int]:
    stats = redis_client().info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def _redis_cpu_s() -> float:
    cpu = redis_client().info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _db_counters(cur: Any, db: str) -> dict[str, int]:
    cur.execute(
        "SELECT xact_commit + xact_rollback, tup_inserted, tup_updated, tup_deleted, "
        "tup_returned + tup_fetched FROM pg_stat_database WHERE datname = %s",
        [db],
    )
    row = cur.fetchone() or (0, 0, 0, 0, 0)
    keys = ("xacts", "rows_inserted", "rows_updated", "rows_deleted", "rows_read")
    return dict(zip(keys, (int(v) for v in row), strict=True))


def background(seconds: float) -> dict[str, float]:
    """WAL bytes/s and Redis commands/s of the shared servers while we do nothing."""
    with _pg() as conn, conn.cursor() as cur:
        wal0, redis0, t0 = _wal_lsn(cur), sum(_redis_calls().values()), time.monotonic()
        time.sleep(seconds)
        wal1, redis1, t1 = _wal_lsn(cur), sum(_redis_calls().values()), time.monotonic()
    span = t1 - t0
    # Our own INFO calls: one per sample, negligible; not subtracted.
    return {"wal_bytes_per_s": (wal1 - wal0) / span, "redis_cmds_per_s": (redis1 - redis0) / span}


def _wal_dir() -> Path | None:
    try:
        with _pg() as conn:
            data = conn.execute("SHOW data_directory").fetchone()[0]
    except Exception:  # noqa: BLE001 - not allowed to read it: no pg_waldump figure
        return None
    wal = Path(data) / "pg_wal"
    return wal if os.access(wal, os.R_OK) else None


def _lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def our_wal_bytes(db_oid: int, start: int, end: int) -> int | None:
    """Bytes of WAL in [start, end) that belong to database ``db_oid``: records with a
    block reference to one of its relations, and the commit/abort records of the
    transactions that wrote them. None when pg_waldump cannot read the segments."""
    wal_dir = _wal_dir()
    exe = PG_BIN / "pg_waldump"
    if wal_dir is None or not exe.exists() or end <= start:
        return None if end > start else 0
    argv = [str(exe), "-p", str(wal_dir), "-s", _lsn_text(start), "-e", _lsn_text(end)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        time.sleep(1.0)  # the end page may still be being written: once more
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and not done.stdout:
        return None
    marker = re.compile(rf"rel \d+/{db_oid}/")
    ours: set[str] = set()
    total = 0
    for line in done.stdout.splitlines():
        m = _WAL_LINE.search(line)
        if not m:
            continue
        size, xid = int(m.group(1)), m.group(2)
        if marker.search(line):
            total += size
            if xid != "0":
                ours.add(xid)
        elif line.startswith("rmgr: Transaction") and xid in ours:
            total += size
    return total


class Meter:
    """``start()`` when the workers are ready, ``stop()`` when they are done.

    ``steps_sql`` (a query on the run's database returning the steps done so far) lets
    the meter count the steps of its own windows; without it ``stop(steps)`` is told."""

    def __init__(
        self,
        db: str,
        worker_pids: list[int],
        bg: dict[str, float] | None = None,
        steps_sql: tuple[str, list[Any]] | None = None,
        redis_db: int | None = None,
    ):
        self.db, self.worker_pids, self.bg = db, list(worker_pids), bg or {}
        self.steps_sql, self.redis_db = steps_sql, redis_db
        self._wal_cut: dict[str, Any] = {}
        self._monitor: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._kind: dict[int, str] = {}

    def _pids(self, cur: Any) -> dict[int, str]:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.db],
        )
        found = {int(r[0]): "pg" for r in cur.fetchall()}
        for pid in self.worker_pids:
            found[pid] = "worker"
            for child in child_pids(pid):
                found[child] = "worker"
        return found

    def _sample(self, cur: Any, first: bool = False) -> None:
        for pid, kind in self._pids(cur).items():
            value = cpu_s(pid)
            if value is None:
                continue
            if pid not in self._base:
                # Seen at start: counted from now. Appeared later: all of its CPU is ours.
                self._base[pid] = value if first else 0.0
                self._kind[pid] = kind
            self._last[pid] = value

    def _steps(self) -> int | None:
        if self.steps_sql is None:
            return None
        with psycopg.connect(
            host=PG_HOST, port=PG_PORT, user="postgres", dbname=self.db, autocommit=True
        ) as conn:
            return int(conn.execute(self.steps_sql[0], self.steps_sql[1]).fetchone()[0])

    def _cut_wal(self, cur: Any) -> None:
        """The WAL window: ends now; read at once (a checkpoint may recycle it later)."""
        if self._wal_cut:
            return
        end = _wal_lsn(cur)
        steps = self._steps()
        self._wal_cut = {
            "s": time.monotonic() - self._t0,
            "server_bytes": end - self._wal0,
            "steps": None if steps is None else steps - (self._steps0 or 0),
            "ours": our_wal_bytes(self._oid, self._wal0, end),
        }

    def _redis_monitor(self) -> None:
        """Commands on our Redis db during MONITOR_S, early in the drain."""
        import redis

        from bench.infra import REDIS_HOST, REDIS_PORT

        if self._stop.wait(0.3):
            return
        counts: dict[str, int] = {}
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_timeout=0.2)
        t_end = time.monotonic() + MONITOR_S
        try:
            with client.monitor() as mon:
                while time.monotonic() < t_end and not self._stop.is_set():
                    try:
                        cmd = mon.next_command()
                    except (redis.TimeoutError, TimeoutError):
                        continue
                    if int(cmd.get("db", -1)) != self.redis_db:
                        continue
                    words = cmd.get("command", "").split(" ", 2)
                    name = words[0].lower()
                    if name == "hset" and len(words) > 1 and words[1] == "unacked":
                        name = "hset unacked"
                    counts[name] = counts.get(name, 0) + 1
        except Exception as exc:  # noqa: BLE001 - informational only
            self._monitor["error"] = repr(exc)
        finally:
            client.close()
        self._monitor["counts"] = counts

    def _loop(self) -> None:
        with _pg() as conn, conn.cursor() as cur:
            while not self._stop.wait(0.25):
                self._sample(cur)
                if not self._wal_cut and time.monotonic() - self._t0 >= WAL_WINDOW_S:
                    self._cut_wal(cur)

    def start(self) -> None:
        self._conn = _pg()
        cur = self._conn.cursor()
        cur.execute("SELECT oid FROM pg_database WHERE datname = %s", [self.db])
        self._oid = int(cur.fetchone()[0])
        self._steps0 = self._steps()
        self._sample(cur, first=True)
        self._t0 = time.monotonic()
        self._wal0 = _wal_lsn(cur)
        if self.redis_db is not None:
            self._mon_thread = threading.Thread(target=self._redis_monitor, daemon=True)
            self._mon_thread.start()
        self._redis0 = _redis_calls()
        self._redis_cpu0 = _redis_cpu_s()
        self._db0 = _db_counters(cur, self.db)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self, steps: int | None = None) -> dict[str, Any]:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
        if self.redis_db is not None:
            self._mon_thread.join(timeout=10)
        cur = self._conn.cursor()
        self._sample(cur)
        self._cut_wal(cur)
        span = time.monotonic() - self._t0
        wal = _wal_lsn(cur) - self._wal0
        counted = self._steps()
        if counted is not None:
            steps = counted - (self._steps0 or 0)
        steps = steps or 0
        redis1 = _redis_calls()
        redis_cpu = _redis_cpu_s() - self._redis_cpu0
        time.sleep(1.2)  # let the backends flush their counters (PostgreSQL 15: >= 1 s)
        db1 = _db_counters(cur, self.db)
        self._conn.close()
        cpu = {"pg": 0.0, "worker": 0.0}
        for pid, base in self._base.items():
            cpu[self._kind[pid]] += max(0.0, self._last.get(pid, base) - base)
        redis_by_cmd = {k: v - self._redis0.get(k, 0) for k, v in redis1.items()}
        redis_total = sum(redis_by_cmd.values())
        n = max(1, steps)
        db = {k: db1[k] - self._db0[k] for k in db1}
        # WAL: ours (pg_waldump, database-filtered) over the cut window's steps; when the
        # window's step count is unknown, its share of our transactions stands in.
        cut = self._wal_cut
        wal_ours: float | None = None
        if cut.get("ours") is not None:
            cut_steps = cut.get("steps")
            if cut_steps:
                wal_ours = cut["ours"] / cut_steps
            elif cut.get("s", 0) >= span - 0.5:  # the cut is the whole window
                wal_ours = cut["ours"] / n
        wal_net = max(0.0, wal - self.bg.get("wal_bytes_per_s", 0.0) * span)
        redis_net = max(0.0, redis_total - self.bg.get("redis_cmds_per_s", 0.0) * span)
        mon = self._monitor.get("counts")
        redis_ours: float | None = None
        if mon is not None:
            delivered = mon.get("hset unacked", 0)
            redis_ours = sum(mon.values()) / delivered if delivered else 0.0
        return {
            "steps": steps,
            "window_s": span,
            "worker_cpu_ms_per_step": cpu["worker"] * 1000 / n,
            "pg_cpu_ms_per_step": cpu["pg"] * 1000 / n,
            "worker_cpu_share": cpu["worker"] / span if span else 0.0,
            "pg_cpu_share": cpu["pg"] / span if span else 0.0,
            "xacts_per_step": db["xacts"] / n,
            "rows_written_per_step": (db["rows_inserted"] + db["rows_updated"] + db["rows_deleted"])
            / n,
            "db_counters": db,
            "wal_bytes_per_step": wal_ours if wal_ours is not None else wal_net / n,
            "wal_source": "pg_waldump, this database"
            if wal_ours is not None
            else "server-wide lsn diff minus background",
            "wal_window": cut,
            "wal_bytes_per_step_server_net": wal_net / n,
            "wal_bytes_per_step_server_raw": wal / n,
            "redis_cmds_per_step": redis_ours if redis_ours is not None else 0.0,
            "redis_monitor": self._monitor,
            "redis_cmds_per_step_server_net": redis_net / n,
            # Server-wide (every client of the shared Redis): its CPU per command.
            "redis_server_cpu_us_per_cmd": redis_cpu * 1e6 / redis_total if redis_total else 0.0,
            "redis_cmds_per_step_server_raw": redis_total / n,
            "redis_top_server": dict(sorted(redis_by_cmd.items(), key=lambda x: -x[1])[:8]),
            "background": self.bg,
        }


def per_step_line(cost: dict[str, Any]) -> str:
    """One cell of the results table."""
    return (
        f"cpu {cost['worker_cpu_ms_per_step']:.2f} ms worker + "
        f"{cost['pg_cpu_ms_per_step']:.2f} ms pg; {cost['xacts_per_step']:.1f} xact, "
        f"{cost['wal_bytes_per_step'] / 1024:.1f} KiB WAL, "
        f"{cost['redis_cmds_per_step']:.1f} redis cmds"
    )
