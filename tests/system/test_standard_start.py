"""The standard start gives the whole product (issue 23): `manage.py migrate`,
gunicorn, `celery worker` and `celery beat`, nothing else - no collectstatic, no
PROMETHEUS_MULTIPROC_DIR, no throttle setting - against PostgreSQL and Redis. The
environment is what production sets: secret key, allowed hosts, database, broker, and
real providers (the console ones are refused outside DEBUG, on purpose).

Then: the admin and the API docs render with their CSS, a trigger runs through a real
worker, /metrics shows that worker's step counter, one key at 100 requests/s is never
throttled, and a key created with --rate gets 429 + Retry-After."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import PAYLOAD, WorkflowFactory
from tests.worker import flush_broker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.worker]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Variables the processes must not inherit from the test run (its settings module, its
# metrics directory, its env file switch): the standard start sets none of them.
INHERITED_PREFIXES = ("DJANGO_", "EMAIL_", "SMS_", "NOTIFYFLOW_", "PROMETHEUS_", "TWILIO_")


def production_env(tmp_path: Path) -> dict[str, str]:
    db = connection.settings_dict
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(INHERITED_PREFIXES) and k not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    return {
        **env,
        "DJANGO_SECRET_KEY": "standard-start-secret-" + "0123456789abcdef" * 3,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": (
            f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
        "SMS_BACKEND": "file",
        "SMS_FILE_PATH": str(tmp_path / "sms"),
        # A fresh checkout's var/ (static root, metrics directory), here a private one.
        "NOTIFYFLOW_VAR_DIR": str(tmp_path / "var"),
        "PYTHONUNBUFFERED": "1",
    }


@contextmanager
def started(args: list[str], *, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "w") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def wait_for_log(proc: subprocess.Popen, log: Path, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{log.name}: no {text!r}:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def samples(text: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.mark.django_db(transaction=True)
def test_the_standard_start_serves_every_page_runs_triggers_and_counts_worker_steps(tmp_path):
    flush_broker()
    env = production_env(tmp_path)
    workflow = WorkflowFactory()
    manage("migrate", "--noinput", env=env)
    key = manage("create_api_key", "e2e", env=env).strip().splitlines()[-1]
    limited = manage("create_api_key", "limited", "--rate", "5/s", env=env).splitlines()[-1]
    port = free_port()
    logs = {name: tmp_path / f"{name}.log" for name in ("web", "worker", "beat")}
    with ExitStack() as stack:
        web = stack.enter_context(
            started(
                [str(BIN / "gunicorn"), "notifyflow.wsgi:application", "-b", f"127.0.0.1:{port}"]
                + ["-w", "2"],
                env=env,
                log=logs["web"],
            )
        )
        worker = stack.enter_context(
            started(
                [str(BIN / "celery"), "-A", "notifyflow", "worker", "-l", "INFO"],
                env=env,
                log=logs["worker"],
            )
        )
        beat = stack.enter_context(
            started(
                [str(BIN / "celery"), "-A", "notifyflow", "beat", "-l", "INFO"]
                + ["-S", "django_celery_beat.schedulers:DatabaseScheduler"]
                + ["-s", str(tmp_path / "beat-schedule")],
                env=env,
                log=logs["beat"],
            )
        )
        wait_for_log(web, logs["web"], "Booting worker")
        wait_for_log(worker, logs["worker"], "ready.")
        wait_for_log(beat, logs["beat"], "beat: Starting")
        http = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30))
        wait_until(lambda: _answers(http, "/healthz"), timeout=60, what="gunicorn")

        # Pages and their stylesheets, no collectstatic.
        for page in ("/admin/login/", "/api/docs/", "/api/schema/", "/api/redoc/"):
            response = http.get(page)
            assert response.status_code == 200, (page, response.text[:500])
            for css in re.findall(r'href="(/static/[^"]+\.css)"', response.text):
                served = http.get(css)
                assert served.status_code == 200, css
                assert served.headers["content-type"].startswith("text/css"), css
        assert "/static/admin/css/base.css" in http.get("/admin/login/").text

        # A trigger runs through the real worker, whose step counter /metrics shows.
        auth = {"Authorization": f"Bearer {key}"}
        created = http.post(
            "/api/v1/triggers/",
            json={"workflow": workflow.key, "idempotency_key": "standard", "payload": PAYLOAD},
            headers=auth,
        )
        assert created.status_code == 201, created.text
        instance_url = f"/api/v1/triggers/{created.json()['id']}/"
        wait_until(
            lambda: http.get(instance_url, headers=auth).json()["status"] == "completed",
            timeout=120,
            interval=0.5,
            what="the instance to complete",
        )
        scraped = http.get("/metrics")
        assert scraped.status_code == 200, scraped.text
        counted = samples(scraped.text)
        for node_type in ("email", "sms"):
            step = ("notifyflow_steps_total", (("node_type", node_type), ("outcome", "success")))
            assert counted.get(step, 0) >= 1, (node_type, scraped.text)
        assert not list((tmp_path / "var" / "static").glob("staticfiles.json"))

        # One key at 100 requests/s for 3 s: never throttled.
        statuses = []
        begun = time.monotonic()
        for i in range(300):
            statuses.append(http.get("/api/v1/workflows/", headers=auth).status_code)
            pause = begun + (i + 1) / 100 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        assert set(statuses) == {200}

        # A key with --rate 5/s: a burst gets 429 with Retry-After, in the error shape.
        burst = [
            http.get("/api/v1/workflows/", headers={"Authorization": f"Bearer {limited}"})
            for _ in range(20)
        ]
        refused = [r for r in burst if r.status_code == 429]
        assert refused and all(r.status_code in (200, 429) for r in burst)
        assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
        assert refused[0].json()["code"] == "throttled"

        for name, proc in (("web", web), ("worker", worker), ("beat", beat)):
            assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-4000:]}"
    assert "Internal Server Error" not in logs["web"].read_text()


def _answers(http: httpx.Client, path: str) -> bool:
    try:
        return http.get(path).status_code == 200
    except httpx.TransportError:
        return False
