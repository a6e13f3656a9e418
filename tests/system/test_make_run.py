"""`make run` (scripts/run.sh), as a newcomer uses it (issues 23 and 38): every manage.py
command works in a plain shell afterwards (the settings read the var/.env it writes),
without a warning; a second start reuses the demo API key, keeps the lines a user added
to var/.env and prints a curl that creates a new instance; a taken port is a one-line
error before anything starts; Ctrl-C ends every process within 15 s, a hung one too."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values

from tests.system.make_run import (
    ROOT,
    STOP_LIMIT_S,
    free_port,
    make_run,
    plain_shell,
    session_processes,
)

# The same on every database: CI runs it once, where nothing is set.
pytestmark = pytest.mark.embedded


def run_setup(var_dir: Path) -> tuple[str, str]:
    """scripts/run.sh without starting the processes; the printed key and idempotency key.
    Nothing it runs warns (static files are collected before any check runs)."""
    result = subprocess.run(
        ["bash", "scripts/run.sh", "--setup-only"],
        cwd=ROOT,
        env=plain_shell(var_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "notifyflow.W001" not in result.stdout + result.stderr, result.stderr
    key = re.search(r"Bearer (nf_\S+)\"", result.stdout)
    idempotency = re.search(r'"idempotency_key": "([^"]+)"', result.stdout)
    assert key and idempotency, result.stdout
    # The line the README's walks start from, and what they read instead: var/.env.
    assert f"\nexport KEY={key.group(1)}\n" in result.stdout, result.stdout
    assert f"\nNOTIFYFLOW_DEMO_API_KEY={key.group(1)}\n" in (var_dir / ".env").read_text()
    return key.group(1), idempotency.group(1)


def api_keys_in(var_dir: Path) -> int:
    with sqlite3.connect(var_dir / "notifyflow.sqlite3") as db:
        return db.execute("SELECT count(*) FROM triggers_apikey").fetchone()[0]


def test_after_make_run_manage_py_works_in_a_plain_shell_and_a_restart_reuses_the_key(
    tmp_path,
):
    first_key, first_demo = run_setup(tmp_path)
    env_file = dotenv_values(tmp_path / ".env")
    assert env_file["NOTIFYFLOW_DEMO_API_KEY"] == first_key
    assert (tmp_path / ".env").stat().st_mode & 0o077 == 0  # holds a secret

    for command in (
        ["createsuperuser", "--noinput", "--username", "ada", "--email", "ada@example.com"],
        ["check"],
        ["showmigrations", "triggers"],
    ):
        result = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=plain_shell(tmp_path, DJANGO_SUPERUSER_PASSWORD="a-long-passphrase-9"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (command, result.stderr)
        assert "W001" not in result.stderr, (command, result.stderr)

    # The demo's webhook host (README, "Status webhooks") is a line of the user's part,
    # which the next start keeps, with a setting of the user's own.
    assert env_file["NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS"] == "hooks.example.com"
    with open(tmp_path / ".env", "a") as env:
        env.write("NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=hooks.example.com,hooks.example.org\n")
        env.write("EMAIL_BACKEND='django.core.mail.backends.filebased.EmailBackend'\n")

    second_key, second_demo = run_setup(tmp_path)
    assert second_key == first_key
    assert api_keys_in(tmp_path) == 1
    assert second_demo != first_demo  # the printed curl creates an instance, not a replay
    kept = dotenv_values(tmp_path / ".env")  # the last line of a variable wins
    assert kept["NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS"] == "hooks.example.com,hooks.example.org"
    assert kept["EMAIL_BACKEND"] == "django.core.mail.backends.filebased.EmailBackend"
    assert kept["NOTIFYFLOW_DEMO_API_KEY"] == first_key


def test_a_taken_port_is_a_one_line_error_before_anything_starts(tmp_path):
    port = free_port()
    with socket.socket() as other:  # another program on the port
        other.bind(("127.0.0.1", port))
        other.listen()
        started = subprocess.Popen(
            ["bash", "scripts/run.sh"],
            cwd=ROOT,
            env=plain_shell(tmp_path / "var", PORT=str(port)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = started.communicate(timeout=60)
        finally:  # whatever it started, if it did not stop at once
            for pid in session_processes(started.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert started.returncode == 1
    assert stdout == ""  # no banner, no key, no curl: nothing that looks like success
    (error,) = stderr.strip().splitlines()
    assert f"port {port} is taken" in error and "PORT=" in error, error
    assert not (tmp_path / "var").exists()  # checked before anything was written or started


HUNG_CELERY = """#!/bin/sh
# The real celery; beside a worker, a process of its own that ignores SIGTERM and SIGINT,
# as a worker that hangs in its shutdown does.
case " $* " in *" worker "*) (trap '' TERM INT; exec sleep 600) & ;; esac
exec {bin}/celery "$@"
"""


def test_ctrl_c_ends_every_process_within_15_s_even_a_hung_one(tmp_path):
    """SIGINT to the process group, as a terminal's Ctrl-C: the worker, beat, gunicorn and
    their children all end, a process that ignores SIGTERM too (killed at the deadline)."""
    real = Path(sys.executable).parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrappers = {
        "python": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
        "gunicorn": f'#!/bin/sh\nexec {real}/gunicorn "$@"\n',
        "celery": HUNG_CELERY.format(bin=real),
    }
    for name, text in wrappers.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    with make_run(tmp_path / "var", py=str(bin_dir / "python")) as product:
        took = product.stop(signal.SIGINT)
        assert took < STOP_LIMIT_S, f"{took:.1f} s:\n{product.output()[-3000:]}"
        assert product.proc.returncode != 0
        assert "killing what is left" in product.output()
