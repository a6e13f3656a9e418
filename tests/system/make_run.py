"""Starting the product the way `make run` does (scripts/run.sh: SQLite and the filesystem
broker under a var/ of its own, web + worker + beat on a free port) and watching every
process it started, for the tests of `make run` and of the docs' walks."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a newcomer's shell has: none of the settings' variables.
SETTINGS_PREFIXES = ("DJANGO_", "EMAIL_", "SMS_", "NOTIFYFLOW_", "PROMETHEUS_", "TWILIO_")
SETTINGS_NAMES = ("DATABASE_URL", "CELERY_BROKER_URL", "PORT")
# Start-up on a loaded 2-core machine: collectstatic, migrate, four Django processes.
START_TIMEOUT_S = 240
# Issue 38: Ctrl-C or SIGTERM ends every process of `make run` within this.
STOP_LIMIT_S = 15


def plain_shell(var_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SETTINGS_PREFIXES) and k not in SETTINGS_NAMES
    }
    return {**env, "NOTIFYFLOW_VAR_DIR": str(var_dir), "PY": sys.executable, **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session_processes(session_id: int) -> list[int]:
    """The live (not zombie) processes of a session: everything `make run` started, also
    what lost its parent, since a process keeps its session (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat.rpartition(")")[2].split()[:4]
        if int(session) == session_id and state != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class Product:
    proc: subprocess.Popen
    port: int
    var_dir: Path
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> float:
        """Send ``sig`` to the process group of `make run` (what a terminal's Ctrl-C or a
        supervisor's stop does); the seconds until every process of it has ended."""
        started = time.monotonic()
        os.killpg(self.proc.pid, sig)
        while session_processes(self.proc.pid) and time.monotonic() - started < 60:
            time.sleep(0.1)
        took = time.monotonic() - started
        self.proc.wait(timeout=30)
        return took

    def kill(self) -> None:
        for pid in session_processes(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def make_run(var_dir: Path, *, port: int | None = None, py: str | None = None) -> Iterator[Product]:
    """scripts/run.sh, started as `make run` starts it, until its banner; killed on exit
    if the test did not stop it."""
    port = port or free_port()
    env = plain_shell(var_dir, PORT=str(port), PYTHONUNBUFFERED="1")
    if py:
        env["PY"] = py
    log = var_dir.parent / f"make-run-{port}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/run.sh"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    product = Product(proc=proc, port=port, var_dir=var_dir, log=log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "\nCtrl-C stops everything." not in product.output():
            assert proc.poll() is None, f"make run exited {proc.returncode}:\n{product.output()}"
            assert time.monotonic() < deadline, (
                f"no banner in {START_TIMEOUT_S} s:\n{product.output()}"
            )
            time.sleep(0.5)
        yield product
    finally:
        if proc.poll() is None or session_processes(proc.pid):
            product.kill()
            proc.wait(timeout=30)
