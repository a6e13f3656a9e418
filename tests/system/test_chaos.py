"""Chaos: real workers, beat and API ride out database and broker faults mid-batch.

Everything runs against a private PostgreSQL cluster and broker (tests/chaos.py: a
redis-server, or a RabbitMQ node when the tests run on amqp://) that these tests restart
and kill; the shared servers are never touched. Each test
drives a batch of email -> 0.5 s delay -> SMS instances through ``celery worker``
subprocesses (prefork -c 2 and solo, side by side), a separate ``celery beat`` and the
API under gunicorn, injects its fault mid-batch, and requires that every instance
completes, that nothing was recorded twice, and that a message was sent twice only
where a send was in flight at the fault. Each prints the batch size, the drain time
after the fault and the duplicate count (docs/operations.md "Guarantees"; a dated run's
figures: docs/measurements.md).

``pytest -m chaos`` selects them; they run in ``make test``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.chaos import PrivateServices, free_port, missing_tools
from tests.chaos_batch import SLOW_SMS, WORKER_PROCESSES, Api, Batch, fleet, report, run_fault
from tests.worker import (
    ROOT,
    SHUTDOWN_TIMEOUT_S,
    celery_worker,
    kill9,
    wait_until,
    worker_env,
)

pytestmark = pytest.mark.chaos

# --- the private services, the API ------------------------------------------------------


@pytest.fixture(scope="module")
def services() -> Iterator[PrivateServices]:
    kind = settings.NOTIFYFLOW_BROKER_KIND
    reason = missing_tools(kind)
    if reason:
        pytest.skip(f"chaos tests start a private PostgreSQL and broker ({kind}): {reason}")
    svc = PrivateServices.start(kind)
    try:
        _manage(svc, "migrate", "--noinput")
        yield svc
    finally:
        svc.stop()


def _env(svc: PrivateServices, tmp_path: Path, **extra: str) -> dict[str, str]:
    return worker_env(
        tmp_path, DATABASE_URL=svc.database_url, CELERY_BROKER_URL=svc.broker_url, **extra
    )


def _manage(svc: PrivateServices, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=_env(svc, svc.root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def api(services: PrivateServices, tmp_path_factory) -> Iterator[Api]:
    """gunicorn (one sync worker: a long-lived persistent DB connection) for the whole
    module, so it lives through every fault of every test."""
    tmp = tmp_path_factory.mktemp("api")
    key = _manage(services, "create_api_key", "chaos").strip().splitlines()[-1]
    port = free_port()
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "notifyflow.wsgi:application",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=_env(services, tmp),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: _listening(port) or proc.poll() is not None, timeout=180, what="gunicorn"
        )
        assert proc.poll() is None, (tmp / "gunicorn.log").read_text()
        yield Api(port, key)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        log.close()


def _listening(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


# --- the faults --------------------------------------------------------------------------


def test_backends_terminated_three_times_mid_batch_every_instance_completes(
    services, api, tmp_path, capsys
):
    batch = Batch(services, api, tmp_path, "terminate")
    killed: list[int] = []

    def terminate_thrice() -> None:
        for _ in range(3):
            killed.append(services.terminate_app_backends())
            time.sleep(0.7)

    with fleet(batch):
        drain_s = run_fault(batch, terminate_thrice)
        # The API's persistent connection was terminated too: it reconnects by itself.
        batch.post(2)
        batch.drain(timeout=300)
    assert all(killed), f"some pg_terminate_backend round found no backend: {killed}"
    figures = batch.check(in_flight_at_faults=3 * WORKER_PROCESSES)
    report(
        capsys,
        "pg_terminate_backend x3",
        batch,
        drain_s,
        figures,
        backends_terminated="+".join(map(str, killed)),
    )


def test_postgresql_restart_mid_batch_every_instance_completes(services, api, tmp_path, capsys):
    batch = Batch(services, api, tmp_path, "pg-restart")
    took: list[float] = []

    def restart() -> None:
        started = time.monotonic()
        services.pg_restart()
        took.append(time.monotonic() - started)

    with fleet(batch):
        drain_s = run_fault(batch, restart)
        # The API's connection did not survive the restart: it reconnects by itself.
        batch.post(2)
        batch.drain(timeout=300)
    figures = batch.check(in_flight_at_faults=WORKER_PROCESSES)
    report(capsys, "PostgreSQL restart", batch, drain_s, figures, restart_took=f"{took[0]:.1f}s")


def test_broker_restart_mid_batch_every_instance_completes_and_api_posts_survive(
    services, api, tmp_path, capsys
):
    batch = Batch(services, api, tmp_path, "broker-restart")
    down: list[float] = []

    def restart() -> None:
        started = time.monotonic()
        services.broker_stop()
        # Posted while the broker is down: the API answers 201 after its publish retries
        # and leaves the instances to the sweeper.
        batch.post(2)
        services.broker_start()
        down.append(time.monotonic() - started)

    with fleet(batch):
        drain_s = run_fault(batch, restart)
    # Steps running when the broker went away finish and record (the database is up):
    # none is cut off, so none waits for its lease and none sends twice.
    figures = batch.check(in_flight_at_faults=0)
    assert figures["leases_recovered"] == 0
    report(
        capsys,
        f"broker restart ({services.broker_kind})",
        batch,
        drain_s,
        figures,
        broker_down=f"{down[0]:.1f}s",
        posted_while_down=2,
    )


def test_worker_sigkilled_during_a_postgresql_outage_every_instance_completes(
    services, api, tmp_path, capsys
):
    batch = Batch(services, api, tmp_path, "kill-in-outage")
    env = {
        "DATABASE_URL": services.database_url,
        "CELERY_BROKER_URL": services.broker_url,
        **SLOW_SMS,
    }
    with fleet(batch, solo=True) as procs:
        batch.create()
        batch.wait_mid_batch()
        outage_started = time.monotonic()
        services.pg_stop()
        time.sleep(1)
        kill9(procs["prefork"])
        time.sleep(2)
        services.pg_start()
        back = time.monotonic()
        outage_s = back - outage_started
        with celery_worker(tmp_path, name="replacement", pool="prefork", concurrency=2, **env):
            drain_s = batch.drain(since=back)
    # The killed worker had at most two sends in flight; the solo worker one more.
    figures = batch.check(in_flight_at_faults=WORKER_PROCESSES)
    report(
        capsys,
        "SIGKILL of a prefork worker during a PostgreSQL outage",
        batch,
        drain_s,
        figures,
        outage=f"{outage_s:.1f}s",
    )


def test_sigterm_mid_batch_finishes_in_flight_steps_and_sends_nothing_twice(
    services, api, tmp_path, capsys
):
    """Warm shutdown: the steps in flight finish and record, the messages it holds go
    back to the broker, and nothing is sent twice."""
    batch = Batch(services, api, tmp_path, "sigterm")
    # Sends of a second, so the SIGTERM surely lands mid-send; the hard limit is 8 s.
    env = {
        "DATABASE_URL": services.database_url,
        "CELERY_BROKER_URL": services.broker_url,
        **SLOW_SMS,
        "NOTIFYFLOW_TEST_SMS_DELAY_S": "1",
    }
    with fleet(batch, solo=False, **env) as procs:
        batch.create()
        batch.wait_mid_batch()
        worker = procs["prefork"]
        stop_started = time.monotonic()
        worker.send_signal(signal.SIGTERM)  # the main process only, as docker stop does
        # Seconds on an idle machine; far longer on a loaded one (every process of the
        # fleet competes for the CPU), so the limit is generous and the wall clock is
        # not what is asserted: the hard time limit is (below).
        worker.wait(timeout=SHUTDOWN_TIMEOUT_S)
        stopped = time.monotonic()
        stop_s = stopped - stop_started
        at_stop = batch.statuses()
        waiting = batch.ids("enqueued")
        queued = queued_steps(services)
        with celery_worker(tmp_path, name="after-sigterm", pool="prefork", concurrency=2, **env):
            drain_s = batch.drain(since=stopped)
    # Warm, and within the hard time limit: it exited by itself, and the pool cut no step
    # off (it would log the hard time limit it enforced).
    assert worker.returncode == 0, worker.returncode
    log = (tmp_path / "worker-prefork.log").read_text()
    assert "TimeLimitExceeded" not in log and "Hard time limit" not in log
    # Nothing was left claimed: every step in flight at the SIGTERM recorded its outcome.
    assert at_stop["processing"] == 0, at_stop
    # ...and every instance still to run has its message back in the queue.
    assert waiting <= queued, f"{len(waiting - queued)} instances have no queued message"
    figures = batch.check(in_flight_at_faults=0)
    assert figures["leases_recovered"] == 0
    report(
        capsys,
        "SIGTERM (warm shutdown) of a prefork worker",
        batch,
        drain_s,
        figures,
        shutdown_took=f"{stop_s:.1f}s",
        unfinished_at_stop=len(waiting),
        their_messages_queued=len(waiting & queued),
    )


def queued_steps(services: PrivateServices) -> set[str]:
    """Instance ids of the execute_node messages waiting in the broker's queue."""
    return {args[0] for args in services.queued_task_args("notifyflow.execute_node")}
