"""One chaos batch (tests/system/test_chaos.py): N email -> 0.5 s delay -> SMS
instances posted through a private fleet's API, what the database says of them, the
fleet that drains them (beat, a prefork and a solo worker) and the checks every fault
must pass: all completed, nothing recorded twice, a message sent twice only where a
send was in flight at the fault."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.chaos import PrivateServices
from tests.factories import PAYLOAD, email_sms_definition
from tests.worker import celery_beat, celery_worker, sent_email, sent_sms, wait_until

N = 40
WORKER_PROCESSES = 3  # prefork -c 2 + solo: at most this many sends in flight at once
DEFINITION = email_sms_definition(delay="PT0.5S")  # email -> 0.5 s delay -> SMS
# The SMS provider takes a while, so faults land while sends are in flight.
SLOW_SMS = {"SMS_BACKEND": "tests.fakes.SlowFileSmsBackend", "NOTIFYFLOW_TEST_SMS_DELAY_S": "0.3"}


@dataclass
class Api:
    port: int
    key: str

    def call(self, method: str, path: str, body: dict) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def trigger(self, workflow: str, key: str) -> int:
        return self.call(
            "POST",
            "/api/v1/triggers/",
            {"workflow": workflow, "idempotency_key": key, "payload": PAYLOAD},
        )


# --- one batch ---------------------------------------------------------------------------


@dataclass
class Batch:
    """N instances of one workflow of their own, and what the database says of them."""

    svc: PrivateServices
    api: Api
    tmp_path: Path
    name: str
    count: int = 0  # instances posted so far

    @property
    def workflow(self) -> str:
        return f"chaos-{self.name}"

    def create(self, n: int = N) -> None:
        """The workflow, then ``n`` instances, all through the API."""
        assert (
            self.api.call(
                "POST",
                "/api/v1/workflows/",
                {
                    "key": self.workflow,
                    "name": self.workflow,
                    "is_active": True,
                    "definition": DEFINITION,
                },
            )
            == 201
        )
        self.post(n)

    def post(self, n: int) -> None:
        numbers = range(self.count, self.count + n)
        codes = Counter(self.api.trigger(self.workflow, f"{self.name}-{i}") for i in numbers)
        assert codes == {201: n}, codes
        self.count += n

    def _rows(self, sql: str) -> list[tuple] | None:
        return self.svc.query(
            sql.replace("{wf}", "(SELECT id FROM workflows_workflow WHERE key = %s)"),
            (self.workflow,),
        )

    def statuses(self) -> Counter:
        rows = self._rows(
            "SELECT status, count(*) FROM triggers_triggerinstance"
            " WHERE workflow_id = {wf} GROUP BY status"
        )
        return Counter(dict(rows or []))

    def ids(self, status: str) -> set[str]:
        rows = self.svc.query(
            "SELECT id::text FROM triggers_triggerinstance WHERE status = %s"
            " AND workflow_id = (SELECT id FROM workflows_workflow"
            " WHERE key = %s)",
            (status, self.workflow),
        )
        return {row[0] for row in rows or []}

    def completed(self) -> int:
        return self.statuses()["completed"]

    def wait_mid_batch(self) -> None:
        """Until some instances are done and some steps are in flight."""
        wait_until(
            lambda: (s := self.statuses())["completed"] >= N // 5 and s["processing"] >= 1,
            timeout=300,
            interval=0.02,
            what="a fifth of the batch done and a step in flight",
        )

    def drain(self, timeout: float = 400, *, since: float | None = None) -> float:
        """Wait for every instance to complete; seconds since ``since`` (or now)."""
        started = time.monotonic() if since is None else since
        wait_until(
            lambda: self.completed() == self.count,
            timeout=timeout,
            interval=0.1,
            what=f"all {self.count} instances of {self.workflow} to complete",
        )
        return time.monotonic() - started

    def check(self, *, in_flight_at_faults: int) -> dict[str, int]:
        """Every instance completed, one sent delivery and one successful step log per
        node, and a message sent twice only where its first send's outcome was lost."""
        assert self.statuses() == {"completed": self.count}
        twice_logged = self._rows(
            "SELECT trigger_id, node_id FROM executions_stepexecutionlog WHERE success"
            " AND workflow_id = {wf} GROUP BY trigger_id, node_id HAVING count(*) > 1"
        )
        assert twice_logged == [], "a step was recorded twice"
        deliveries = self._rows(
            "SELECT d.instance_id, d.node_id, d.channel, d.status, d.attempts"
            " FROM executions_delivery d JOIN triggers_triggerinstance i"
            " ON i.id = d.instance_id WHERE i.workflow_id = {wf}"
        )
        assert deliveries is not None and len(deliveries) == 2 * self.count
        emails, sms = sent_email(self.tmp_path), sent_sms(self.tmp_path)
        for instance_id, node_id, channel, status, attempts in deliveries:
            assert status == "sent"
            sent = (emails if channel == "email" else sms)[f"{instance_id}:{node_id}"]
            # A repeat needs an attempt whose outcome was lost ('sending' -> attempts 2).
            assert 1 <= sent <= attempts, (instance_id, node_id, sent, attempts)
        twice = sum(1 for count in (emails + sms).values() if count > 1)
        assert twice <= in_flight_at_faults, "only sends in flight at a fault may repeat"
        recovered = self._rows(
            "SELECT count(*) FROM executions_stepexecutionlog"
            " WHERE workflow_id = {wf} AND error_kind = 'lease_expired'"
        )
        return {
            "sent_twice": twice,
            "leases_recovered": recovered[0][0] if recovered else 0,
            "emails": sum(emails.values()),
            "sms": sum(sms.values()),
        }


@contextmanager
def fleet(batch: Batch, *, solo: bool = True, **env: str) -> Iterator[dict]:
    """Beat, a prefork worker (-c 2) and, unless ``solo`` is False, a solo worker."""
    env = {
        "DATABASE_URL": batch.svc.database_url,
        "CELERY_BROKER_URL": batch.svc.broker_url,
        **SLOW_SMS,
        **env,
    }
    with ExitStack() as stack:
        procs = {
            "beat": stack.enter_context(celery_beat(batch.tmp_path, **env)),
            "prefork": stack.enter_context(
                celery_worker(batch.tmp_path, name="prefork", pool="prefork", concurrency=2, **env)
            ),
        }
        if solo:
            procs["solo"] = stack.enter_context(celery_worker(batch.tmp_path, name="solo", **env))
        yield procs


def report(capsys, fault: str, batch: Batch, drain_s: float, figures: dict, **more) -> None:
    tracebacks = sum(
        p.read_text().count("Traceback (most recent call last)")
        for p in batch.tmp_path.glob("*.log")
    )
    extra = " ".join(f"{k}={v}" for k, v in {**more, **figures}.items())
    with capsys.disabled():
        print(
            f"\n[chaos: {fault}] instances={batch.count} "
            f"drained_after_fault={drain_s:.1f}s {extra} tracebacks_logged={tracebacks}"
        )


def run_fault(batch: Batch, fault: Callable[[], None]) -> float:
    """Create the batch, let it get going, inject ``fault``; the drain time after it."""
    batch.create()
    batch.wait_mid_batch()
    fault()
    return batch.drain()
