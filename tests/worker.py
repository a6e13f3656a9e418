"""Real ``celery worker`` subprocesses for end-to-end tests (PostgreSQL + Redis or
RabbitMQ).

The worker reads the pytest-django test database, so use it with ``transactional_db``
(rows must be committed to be seen).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email import message_from_bytes
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
CELERY = str(Path(sys.executable).parent / "celery")
# Limits for waits on worker processes: far above what an idle machine needs (a few
# seconds), because a test that fails on a busy 2-core machine is a broken test. Every
# wait polls for its condition and returns as soon as it holds.
STARTUP_TIMEOUT_S = 180
SHUTDOWN_TIMEOUT_S = 120


def flush_broker() -> None:
    """Empty the test broker: its Redis db, or (RabbitMQ) every queue of the app in its
    vhost (CI gives the tests a db and a vhost of their own). Messages a stopped worker
    held unacked are back in their queue by then (RabbitMQ requeues them when the
    worker's connection closes), so they go too."""
    if settings.NOTIFYFLOW_BROKER_KIND == "redis":
        import redis

        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
        return
    from notifyflow.celery import app

    # Celery's own purge (`celery purge`): declares the app's queues, then purges each.
    with app.connection_for_write() as conn:
        app.control.purge(connection=conn)


def worker_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    db = connection.settings_dict
    url = (
        f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
        "SMS_BACKEND": "file",
        "SMS_FILE_PATH": str(tmp_path / "sms"),
        "NOTIFYFLOW_RETRY_BASE_DELAY_S": "1",
        "NOTIFYFLOW_SWEEP_INTERVAL_S": "1",
        "NOTIFYFLOW_REDISPATCH_AFTER_S": "2",
        "NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S": "5",
        "NOTIFYFLOW_STEP_TIME_LIMIT_S": "8",
        "NOTIFYFLOW_LEASE_S": "10",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(overrides)
    return env


@contextmanager
def celery_worker(
    tmp_path: Path,
    *,
    name: str = "w1",
    pool: str = "solo",
    concurrency: int = 1,
    beat: bool = False,
    **env: str,
) -> Iterator[subprocess.Popen]:
    """Start ``celery -A notifyflow worker`` and wait until it is ready; stop it after.

    ``solo`` (one process, quick to start) becomes prefork with the same concurrency on
    RabbitMQ: there Celery's solo pool takes one more message only every 2 s while it
    holds countdown messages (a dozen parked instances took 25 s instead of 0.2 s),
    and prefork is the pool every documented worker command uses anyway."""
    if pool == "solo" and settings.NOTIFYFLOW_BROKER_KIND == "amqp":
        pool = "prefork"
    args = [
        CELERY,
        "-A",
        "notifyflow",
        "worker",
        "-l",
        "INFO",
        "-n",
        f"{name}@%h",
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-O",
        "fair",
        "--without-gossip",
        "--without-mingle",
    ]
    if beat:
        args += [
            "-B",
            "--scheduler",
            "django_celery_beat.schedulers:DatabaseScheduler",
            "-s",
            str(tmp_path / f"beat-{name}"),
        ]
    with celery_process(tmp_path, args, log_name=f"worker-{name}", ready="ready.", env=env) as proc:
        yield proc


@contextmanager
def celery_beat(tmp_path: Path, *, name: str = "beat", **env: str) -> Iterator[subprocess.Popen]:
    """Start ``celery -A notifyflow beat`` (its own process, as in production)."""
    args = [
        CELERY,
        "-A",
        "notifyflow",
        "beat",
        "-l",
        "INFO",
        "--scheduler",
        "django_celery_beat.schedulers:DatabaseScheduler",
        "-s",
        str(tmp_path / name),
    ]
    with celery_process(tmp_path, args, log_name=name, ready="beat: Starting", env=env) as proc:
        yield proc


@contextmanager
def celery_process(
    tmp_path: Path, args: list[str], *, log_name: str, ready: str, env: dict[str, str]
) -> Iterator[subprocess.Popen]:
    log_path = tmp_path / f"{log_name}.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=worker_env(tmp_path, **env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        # Generous: a loaded 2-core machine takes its time to import Django and Celery.
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while ready not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{log_name} did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def kill9(proc: subprocess.Popen) -> None:
    """SIGKILL the worker and every process it started (no graceful anything)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_until(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.2,
    every: Callable[[], object] | None = None,
    what: str = "condition",
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        if every is not None:
            every()
        time.sleep(interval)


def sent_sms(tmp_path: Path) -> Counter:
    """How many SMS the file backend wrote per idempotency key (instance:node)."""
    folder = tmp_path / "sms"
    if not folder.exists():
        return Counter()
    return Counter(json.loads(p.read_text())["idempotency_key"] for p in folder.glob("*.json"))


def sent_email(tmp_path: Path) -> Counter:
    """How many emails the filebased backend wrote per idempotency key (instance:node)."""
    folder = tmp_path / "mail"
    counts: Counter = Counter()
    if not folder.exists():
        return counts
    for path in folder.glob("*.log"):
        # One file per backend connection, messages separated by a line of dashes.
        for chunk in path.read_bytes().split(b"-" * 79 + b"\n"):
            if chunk.strip():
                key = message_from_bytes(chunk.strip()).get("X-NotifyFlow-Idempotency-Key")
                if key:
                    counts[key] += 1
    return counts
