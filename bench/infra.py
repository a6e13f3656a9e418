"""Processes, database and broker for a bench run. Everything started here is stopped
by ``Procs.stop_all`` (called from a ``finally`` in run.py), also on error."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
OUT_DIR = ROOT / "var" / "bench"
PG_HOST, PG_PORT = "127.0.0.1", 5432
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
DB_NAME = os.environ.get("BENCH_DB_NAME", "notifyflow_bench")
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "9"))
DATABASE_URL = f"postgres://postgres@{PG_HOST}:{PG_PORT}/{DB_NAME}"
# BENCH_BROKER_URL=amqp://guest:guest@127.0.0.1:5672/nfbench runs the same scenarios on
# RabbitMQ (bench/SCALING.md's broker comparison; a vhost of its own, since the bench
# purges its queues); Redis stays the cache either way.
BROKER_URL = os.environ.get("BENCH_BROKER_URL") or f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
ON_AMQP = BROKER_URL.startswith("amqp")
# One process per worker node: solo on Redis; on RabbitMQ a one-child prefork node,
# since a solo node there stalls for seconds between deliveries (bench/SCALING.md).
WORKER_POOL = ("-P", "prefork", "-c", "1") if ON_AMQP else ("-P", "solo")
# Every queue a plain `celery -A notifyflow worker` consumes, in its order (the lanes,
# critical first, then the queue of before the lanes: CELERY_TASK_QUEUES), which is also
# every queue a step or a reference task can be in.
QUEUES = (
    "notifyflow.critical",
    "notifyflow.high",
    "notifyflow.default",
    "notifyflow.bulk",
    "celery",
)


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of every process of the run: its own DB and Redis db, null
    providers, quiet logs. CI's DATABASE_URL / CELERY_BROKER_URL are overridden."""
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "DATABASE_URL": DATABASE_URL,
            "CELERY_BROKER_URL": BROKER_URL,
            "EMAIL_BACKEND": "bench.backends.NullEmailBackend",
            "SMS_BACKEND": "bench.backends.NullSmsBackend",
            "LOG_LEVEL": "WARNING",
            "NOTIFYFLOW_SWEEP_INTERVAL_S": "1",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def redis_client() -> Any:
    import redis

    return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)


def broker_backlog() -> dict[str, int]:
    """Messages held by the broker, over every queue: ready and delivered-unacked."""
    if ON_AMQP:
        return _amqp_backlog()
    return {"ready": broker_ready(), "unacked": int(redis_client().hlen("unacked"))}


def broker_ready() -> int:
    """Messages waiting in our queues, not yet delivered (cheap on both brokers)."""
    if ON_AMQP:
        return _amqp_ready()
    pipe = redis_client().pipeline()
    for name in QUEUES:
        pipe.llen(name)
    return sum(int(n) for n in pipe.execute())


def _amqp_ready() -> int:
    from kombu import Connection

    ready = 0
    with Connection(BROKER_URL) as conn:
        channel = conn.default_channel
        for name in QUEUES:
            try:
                ready += channel.queue_declare(name, passive=True).message_count
            except Exception:  # noqa: BLE001 - a queue not declared yet holds nothing
                channel = conn.channel()
    return ready


def _amqp_backlog() -> dict[str, int]:
    """RabbitMQ's ready messages by passive declares (cheap, polled); its unacked ones
    only from the management CLI (about a second), so asked only once nothing is ready."""
    ready = _amqp_ready()
    if ready:
        return {"ready": ready, "unacked": 0}
    # Both figures from one listing: a step publishes its successor before it acks, so
    # a "nothing ready" read before this one and "nothing unacked" here could miss it.
    listed = subprocess.run(
        [
            "rabbitmqctl",
            "list_queues",
            "-p",
            _amqp_vhost(),
            "-q",
            "--no-table-headers",
            "name",
            "messages_ready",
            "messages_unacknowledged",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.split()
    rows = [listed[i : i + 3] for i in range(0, len(listed) - 2, 3)]
    mine = [row for row in rows if row[0] in QUEUES]
    return {
        "ready": sum(int(row[1]) for row in mine),
        "unacked": sum(int(row[2]) for row in mine),
    }


def _amqp_vhost() -> str:
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(BROKER_URL).path[1:]) or "/"


def broker_flush() -> None:
    """Empty every queue (and, on Redis, the whole bench db: unacked and delayed too)."""
    if not ON_AMQP:
        redis_client().flushdb()
        return
    from kombu import Connection

    with Connection(BROKER_URL) as conn:
        for name in QUEUES:
            channel = conn.channel()
            try:
                channel.queue_purge(name)
            except Exception:  # noqa: BLE001 - not declared yet: nothing to purge
                pass
            finally:
                channel.close()


def manage(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env or bench_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    """Resident set size of one process, from /proc (no psutil)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def child_pids(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _warm(port: int, requests: int = 12) -> bool:
    """True once the app answers; then a few more requests so every worker has loaded
    Django (gunicorn imports the app after fork, while the socket already accepts)."""
    import http.client

    for _ in range(requests):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", "/healthz")
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()
    return True


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def raise_if_any_died(procs: Iterable[Proc]) -> None:
    """A drain's check between polls: a worker that died fails the scenario with its log's
    tail instead of running into the drain's deadline."""
    for proc in procs:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} died:\n{proc.tail()}")


@dataclass
class Procs:
    """Every subprocess this run started; stops them by pid (then their own group)."""

    run_dir: Path
    procs: list[Proc] = field(default_factory=list)
    # Seconds spent starting and stopping processes (run.py prints them per scenario,
    # so a slow quick run shows whether the processes or the measured work grew).
    churn_s: float = 0.0

    @contextmanager
    def _churn(self) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.churn_s += time.monotonic() - t0

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Proc:
        log = self.run_dir / f"{name}.log"
        handle = log.open("ab")
        popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        handle.close()
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def stop(self, proc: Proc, timeout: float = 20.0) -> None:
        if proc.alive():
            proc.popen.send_signal(signal.SIGTERM)
            try:
                proc.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:  # the session we created for it: the process and its own children
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.popen.wait(timeout=10)
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(reversed(self.procs)):
            try:
                self.stop(proc)
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                print(f"warning: could not stop {proc.name} ({proc.pid}): {exc}", file=sys.stderr)

    # --- servers ----------------------------------------------------------------------

    def gunicorn(self, name: str, port: int, workers: int = 2) -> Proc:
        with self._churn():
            return self._gunicorn(name, port, workers)

    def _gunicorn(self, name: str, port: int, workers: int) -> Proc:
        argv = [
            str(VENV_BIN / "gunicorn"),
            "notifyflow.wsgi:application",
            "-k",
            "sync",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            "--backlog",
            "2048",
            "--log-level",
            "warning",
        ]
        proc = self.start(name, argv, bench_env())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"{name} exited:\n{proc.tail()}")
            with socket.socket() as s:
                up = s.connect_ex(("127.0.0.1", port)) == 0
            if up and len(child_pids(proc.pid)) >= workers and _warm(port):
                return proc
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not listen on {port}:\n{proc.tail()}")

    def celery_workers(
        self,
        count: int,
        *,
        tag: str,
        extra_env: dict[str, str] | None = None,
        queues: str = ",".join(QUEUES),
    ) -> list[Proc]:
        """``count`` worker nodes, one process each (WORKER_POOL; a node's
        consumer loop is the ceiling, so scale by nodes), consuming ``queues``."""
        with self._churn():
            return self._celery_workers(count, tag, extra_env, queues)

    def _celery_workers(
        self, count: int, tag: str, extra_env: dict[str, str] | None, queues: str
    ) -> list[Proc]:
        marker_dir = self.run_dir / f"markers-{tag}"
        marker_dir.mkdir(parents=True, exist_ok=True)
        for old in marker_dir.iterdir():
            old.unlink()
        env = bench_env(BENCH_MARKER_DIR=str(marker_dir), **(extra_env or {}))
        procs = []
        for n in range(1, count + 1):
            argv = [
                str(VENV_BIN / "celery"),
                "-A",
                "notifyflow",
                "worker",
                *WORKER_POOL,
                "-n",
                f"bench{n}-{tag}@%h",
                "-l",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-Q",
                queues,
            ]
            procs.append(self.start(f"worker{n}-{tag}", argv, env))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for proc in procs:
                if not proc.alive():
                    raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
            if len(list(marker_dir.glob("ready-*"))) >= count:
                return procs
            time.sleep(0.1)
        raise RuntimeError(
            "celery workers not ready in 60 s:\n" + "\n".join(p.tail() for p in procs)
        )

    def stop_workers(self, procs: list[Proc]) -> list[dict[str, Any]]:
        """Warm shutdown; returns the no-op stats each node wrote on its way out."""
        with self._churn():
            for proc in procs:
                if proc.alive():
                    proc.popen.send_signal(signal.SIGTERM)
            for proc in procs:
                self.stop(proc, timeout=30)
        stats = []
        for proc in procs:
            marker_dirs = {p.parent for p in self.run_dir.glob("markers-*/noop-*")}
            for d in marker_dirs:
                for f in d.glob(f"noop-*-{proc.pid}.json"):
                    stats.append(json.loads(f.read_text()))
        return stats
