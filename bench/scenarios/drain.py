"""Loading instances into a run and waiting for them: bulk preloads and parked
waiters, the wait until a drain is done (and the watch for messages an outside flush
lost), the step rate of a drain from its step logs."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Max, Min
from django.utils import timezone

from bench.infra import broker_backlog, broker_ready, raise_if_any_died
from bench.scenarios.common import DISTURBANCES, PAYLOAD, S
from executions.models import StepExecutionLog
from notifyflow.celery import app as celery_app
from notifyflow.ids import uuid7
from triggers.models import TriggerInstance
from workflows.models import Workflow


def due_rows(wf: Workflow, prefix: str, numbers: range, at: datetime) -> list[TriggerInstance]:
    """Due instances of ``wf``'s current version at its entry node, sent at ``at``
    (unsaved; keys ``{prefix}-{number}``)."""
    version = wf.current_version
    return [
        TriggerInstance(
            id=uuid7(),  # the product's ids (notifyflow.ids)
            workflow=wf,
            workflow_version=version,
            idempotency_key=f"{prefix}-{i}",
            payload=PAYLOAD,
            status=S.ENQUEUED,
            current_node_id=version.definition["entry_node_id"],
            vars={},
            attempts=0,
            available_at=at,
            dispatched_at=at,
        )
        for i in numbers
    ]


def preload(
    wf: Workflow,
    n: int,
    prefix: str,
    *,
    chunk: int = 5000,
    on_chunk: Callable[[], None] | None = None,
) -> list[uuid.UUID]:
    """Create ``n`` due instances with one bulk INSERT per chunk and send their first
    message, as trigger_create would, without the per-request cost."""
    from executions.tasks import execute_node

    ids: list[uuid.UUID] = []
    for start in range(0, n, chunk):
        rows = due_rows(wf, prefix, range(start, min(n, start + chunk)), timezone.now())
        TriggerInstance.objects.bulk_create(rows, batch_size=1000)
        with celery_app.producer_or_acquire() as producer:
            for row in rows:
                execute_node.apply_async(args=(str(row.id),), producer=producer)
        ids.extend(r.id for r in rows)
        if on_chunk:
            on_chunk()
    return ids


class StallWatch:
    """Notices when the broker lost our messages (this machine is shared: a test that
    runs Redis FLUSHALL empties db 9 too) and re-sends them, as the sweeper would after
    NOTIFYFLOW_REDISPATCH_AFTER_S. No progress for ``after_s`` with an empty broker and
    due enqueued instances left = lost messages."""

    def __init__(self, wf: Workflow, since: datetime | None, after_s: float = 20.0) -> None:
        self.wf, self.since, self.after_s = wf, since, after_s
        self.last_value: int | None = None
        self.last_change = time.monotonic()

    def check(self, progress: int) -> None:
        now = time.monotonic()
        if progress != self.last_value:
            self.last_value, self.last_change = progress, now
            return
        if now - self.last_change < self.after_s:
            return
        backlog = broker_backlog()
        if backlog["ready"] or backlog["unacked"]:
            return
        from executions.tasks import execute_node

        qs = TriggerInstance.objects.filter(
            workflow=self.wf, status=S.ENQUEUED, available_at__lte=timezone.now()
        )
        if self.since is not None:
            qs = qs.filter(created_at__gte=self.since)
        ids = list(qs.values_list("id", flat=True))
        with celery_app.producer_or_acquire() as producer:
            for instance_id in ids:
                execute_node.apply_async(args=(str(instance_id),), producer=producer)
        note = (
            f"{self.wf.key}: no progress for {self.after_s:.0f} s and an empty broker: "
            f"re-sent {len(ids)} lost messages (external Redis flush?)"
        )
        print(f"    warning: {note}", flush=True)
        DISTURBANCES.append(note)
        self.last_change = now


# While the broker still holds messages, the finished count runs this seldom.
COUNT_EVERY_S = 5.0


def wait_terminal(
    wf: Workflow,
    n: int,
    timeout_s: float,
    *,
    since: datetime | None = None,
    procs: Iterable[Any] = (),
    poll_s: float = 0.25,
) -> dict[str, int]:
    """Poll until ``n`` instances of ``wf`` (created since ``since``) are finished.

    The count reads every finished instance (no vacuum runs during a drain, so the
    index-only scan fetches each heap row: ~250 ms at 100,000 on this machine), so it
    runs only when no message of ours is waiting in a queue, or every COUNT_EVERY_S
    otherwise: polled four times a second it took a growing share of PostgreSQL and of
    the 2 cores the workers share, and the references, which poll marker files, paid
    none of it (bench/RESULTS.md, "Issue 29: execution at 3k / 20k / 100k"). Delivered
    but unacknowledged messages do not hold the count back: on Redis a countdown message
    (a batch window, a delay, the sweeper's) stays unacked for its whole countdown, and
    waiting for those made every later drain end on a 5 s tick."""
    qs = TriggerInstance.objects.filter(workflow=wf)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    deadline = time.monotonic() + timeout_s
    done = 0
    counted_at = 0.0
    watch = StallWatch(wf, since)
    while time.monotonic() < deadline:
        if broker_ready() and time.monotonic() - counted_at < COUNT_EVERY_S:
            time.sleep(poll_s)
            continue
        counted_at = time.monotonic()
        done = qs.filter(status__in=[S.COMPLETED, S.FAILED]).count()
        if done >= n:
            break
        watch.check(done)
        raise_if_any_died(procs)
        time.sleep(poll_s)
    else:
        raise RuntimeError(f"{wf.key}: only {done}/{n} instances finished in {timeout_s:.0f} s")
    failed = qs.filter(status=S.FAILED).count()
    if failed:
        sample = qs.filter(status=S.FAILED).values_list("last_error", flat=True).first()
        print(f"    warning: {failed} {wf.key} instances failed, e.g. {sample}", flush=True)
    return {"finished": done, "failed": failed}


def close_out(wf: Workflow) -> None:
    """Mark every unfinished instance of ``wf`` completed (so no sweeper ever picks it)."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE triggers_triggerinstance SET status='completed', current_node_id=NULL, "
            "lease_token=NULL, locked_by='', locked_until=NULL, finished_at=now(), "
            "updated_at=now() WHERE workflow_id=%s AND status IN ('enqueued','processing')",
            [wf.pk],
        )


def step_rate(wf: Workflow, since: datetime) -> dict[str, float]:
    logs = StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
    agg = logs.aggregate(first=Min("started_at"), last=Max("finished_at"))
    count = logs.count()
    span = (agg["last"] - agg["first"]).total_seconds() if count else 0.0
    return {"steps": count, "span_s": span, "steps_per_s": count / span if span else 0.0}


UUID7_SQL = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)"
    " from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid"
)
PARK_SQL = """
WITH parked AS (
  INSERT INTO triggers_triggerinstance
    (id, workflow_id, workflow_version_id, idempotency_key, payload, status, current_node_id,
     vars, attempts, available_at, lease_token, locked_by, locked_until, dispatched_at,
     last_error, waiting_for_event, wait_deadline, created_at, updated_at, finished_at,
     created_by_key)
  SELECT {uuid7}, %(wf)s, %(ver)s, %(prefix)s || '-' || g, %(payload)s::jsonb,
         'enqueued', 'w', '{}'::jsonb, 0, now() + interval '1 hour', NULL, '', NULL, NULL,
         '', 'go', now() + interval '1 hour', now(), now(), NULL, 'bench'
  FROM generate_series(1, %(n)s) AS g
  RETURNING id
), interest AS (
  INSERT INTO triggers_interest (instance_id, subject)
  SELECT id, %(subject)s::text FROM parked WHERE %(subject)s::text IS NOT NULL
)
SELECT id FROM parked
""".replace("{uuid7}", UUID7_SQL)


def park(wf: Workflow, n: int, prefix: str, subject: str | None) -> list[uuid.UUID]:
    with connection.cursor() as cur:
        cur.execute(
            PARK_SQL,
            {
                "wf": wf.pk,
                "ver": wf.current_version_id,
                "prefix": prefix,
                "payload": json.dumps(PAYLOAD),
                "n": n,
                "subject": subject,
            },
        )
        return [row[0] for row in cur.fetchall()]
