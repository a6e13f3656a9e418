"""Scenario 6's fan-out: one event delivered to N waiting instances through the API,
next to the same rows and wake written by hand, and a profile of one delivery."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Max
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.infra import redis_client
from bench.scenarios.common import Ctx, flush_broker, out_dir
from bench.scenarios.drain import close_out, step_rate, wait_terminal
from notifyflow.celery import app as celery_app
from triggers.models import TriggerInstance
from workflows.models import Workflow

# The fan-out's reference: the same rows a delivery writes and the same wake, by hand
# (one INSERT ... SELECT into the inbox, one UPDATE making them due, one commit).
REF_INBOX_SQL = """
INSERT INTO triggers_inboxevent
  (instance_id, name, event_id, context, received_at, consumed_by_node)
SELECT i.instance_id, 'go', %s, '{}'::jsonb, now(), ''
FROM triggers_interest i WHERE i.subject = %s
"""
REF_WAKE_SQL = """
UPDATE triggers_triggerinstance t SET available_at = now(), dispatched_at = now()
FROM triggers_interest i
WHERE i.instance_id = t.id AND i.subject = %s AND t.status = 'enqueued'
RETURNING t.id
"""


def post_json(
    port: int, path: str, token: str, body: dict[str, Any], timeout: float = 120.0
) -> tuple[int, dict[str, Any]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "POST",
            path,
            json.dumps(body),
            {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        data = json.loads(raw)
    except ValueError:
        data = {"raw": raw[:500].decode(errors="replace")}
    return resp.status, data if isinstance(data, dict) else {"data": data}


def _finished_span(wf: Workflow, start: datetime) -> float:
    """Seconds from ``start`` to the last finish of ``wf``'s instances (database clock
    of the workers' writes; same host)."""
    last = TriggerInstance.objects.filter(workflow=wf).aggregate(last=Max("finished_at"))["last"]
    return (last - start).total_seconds() if last else 0.0


def profile_delivery(ctx: Ctx, n: int) -> dict[str, Any]:
    """The delivery of one event to n parked instances in-process (no workers running):
    its queries and a pyinstrument profile, then the instances are closed out."""
    from triggers.events import event_receive

    wf = ctx.workflows["bench-fanout-prof"]
    profiles = out_dir(ctx, "profiles")
    profiles.mkdir(parents=True, exist_ok=True)
    try:
        from pyinstrument import Profiler

        prof: Any = Profiler(interval=0.0005)
    except ImportError:
        prof = None
    t0 = time.perf_counter()
    with CaptureQueriesContext(connection) as cq:
        if prof is not None:
            prof.start()
        try:
            result = event_receive(
                name="go", event_id="prof-1", context={"campaign": 0}, subjects=["campaign:prof"]
            )
        finally:
            if prof is not None:
                prof.stop()
    wall = time.perf_counter() - t0
    if len(result.delivered) != n:
        raise RuntimeError(f"profile delivery reached {len(result.delivered)} of {n}")
    lines = [f"event_receive to {n} parked instances: {wall:.3f} s, {len(cq)} queries", ""]
    lines += [f"  {q['time']}s  {q['sql'][:240]}" for q in cq.captured_queries]
    (profiles / "running_deliver_queries.txt").write_text("\n".join(lines) + "\n")
    if prof is not None:
        (profiles / "running_deliver.txt").write_text(prof.output_text(unicode=True, color=False))
        (profiles / "running_deliver.html").write_text(prof.output_html())
    close_out(wf)
    flush_broker()
    sql_s = sum(float(q["time"]) for q in cq.captured_queries)
    return {"instances": n, "wall_s": wall, "queries": len(cq), "sql_s": sql_s}


def fanout_reference(ctx: Ctx, n: int, workers: list[Any]) -> dict[str, Any]:
    """The same n parked instances made due by hand: the inbox rows and the wake in one
    transaction, then n messages from one producer, drained by the same workers."""
    from executions.tasks import execute_node

    wf = ctx.workflows["bench-fanout-ref"]
    start = timezone.now()
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(REF_INBOX_SQL, ["ref-1", "campaign:ref"])
        cur.execute(REF_WAKE_SQL, ["campaign:ref"])
        ids = [row[0] for row in cur.fetchall()]
    committed = time.perf_counter() - t0
    with celery_app.producer_or_acquire() as producer:
        for instance_id in ids:
            execute_node.apply_async(args=(str(instance_id),), producer=producer)
    sent = time.perf_counter() - t0
    if len(ids) != n:
        raise RuntimeError(f"fan-out reference woke {len(ids)} of {n}")
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, procs=workers)
    return {
        "committed_s": committed,
        "sent_s": sent,
        "done_s": _finished_span(wf, start),
        "status": status,
        "rate": step_rate(wf, start),
    }


def _all_dispatched(wf: Workflow, n: int, t0: float, answer: dict[str, Any]) -> tuple[float, int]:
    """Seconds from t0 until every woken instance's next step is in the broker: the POST
    has answered (a wake done in the request has sent its messages), all n are marked
    dispatched in the database and no ``wake_waiting`` task (which publishes its messages
    after its commit, then acks) is left in the queue or in flight."""
    r = redis_client()
    marker = b"notifyflow.wake_waiting"
    polls = 0
    with connection.cursor() as cur:
        while True:
            polls += 1
            cur.execute(
                "SELECT count(*) FROM triggers_triggerinstance "
                "WHERE workflow_id = %s AND dispatched_at IS NOT NULL",
                [wf.pk],
            )
            if cur.fetchone()[0] >= n and "t" in answer:
                # The oldest messages are at the list's tail (LPUSH / BRPOP): the wake tasks
                # were sent before any step message, so the tail is enough.
                queued = r.lrange("notifyflow.high", -500, -1)
                inflight = r.hvals("unacked")
                if not any(marker in m for m in queued) and not any(marker in m for m in inflight):
                    return time.perf_counter() - t0, polls
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("fan-out: next steps not all dispatched after 300 s")
            time.sleep(0.005)


def fanout(ctx: Ctx, port: int, n: int, workers: list[Any]) -> dict[str, Any]:
    """POST /api/v1/events/ with subjects ["campaign:1"] through gunicorn; the main
    thread polls the inbox (one transaction writes all n rows, so the count jumps from 0
    to n) and then the instances' completion."""
    wf = ctx.workflows["bench-fanout"]
    event_id = f"campaign-1-{uuid.uuid4().hex[:6]}"
    body = {
        "name": "go",
        "event_id": event_id,
        "context": {"campaign": 1},
        "subjects": ["campaign:1"],
    }
    answer: dict[str, Any] = {}

    def post() -> None:
        try:
            answer["status"], answer["body"] = post_json(port, "/api/v1/events/", ctx.token, body)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            answer["error"] = repr(exc)
        answer["t"] = time.perf_counter()

    poster = threading.Thread(target=post, daemon=True)
    start = timezone.now()
    t0 = time.perf_counter()
    poster.start()
    committed: float | None = None
    polls = 0
    with connection.cursor() as cur:
        while committed is None:
            cur.execute("SELECT count(*) FROM triggers_inboxevent WHERE event_id = %s", [event_id])
            count = cur.fetchone()[0]
            polls += 1
            if count >= n:
                committed = time.perf_counter() - t0
            elif "t" in answer:
                # The POST may have committed and answered since the count above.
                cur.execute(
                    "SELECT count(*) FROM triggers_inboxevent WHERE event_id = %s", [event_id]
                )
                count = cur.fetchone()[0]
                if count < n:
                    raise RuntimeError(f"fan-out POST ended with {count}/{n} inbox rows: {answer}")
                committed = time.perf_counter() - t0
            elif time.perf_counter() - t0 > 300:
                raise RuntimeError(f"fan-out: {count}/{n} inbox rows after 300 s")
            else:
                time.sleep(0.002)
    dispatched, dispatch_polls = _all_dispatched(wf, n, t0, answer)
    poster.join(timeout=300)
    # A POST that dies after the commit (e.g. gunicorn's 30 s worker timeout while the
    # wake sends its messages) is reported, not hidden: the drain is still measured (the
    # stall watch re-sends what was never sent, as the sweeper would) and the scenario
    # fails after its rows are printed.
    failure = None
    if answer.get("status") != 202 or answer.get("body", {}).get("delivered") != n:
        failure = f"fan-out POST: {answer.get('status')} {str(answer)[:300]}"
        print(f"    warning: {failure}", flush=True)
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, procs=workers)
    return {
        "event_id": event_id,
        "failure": failure,
        "committed_s": committed,
        "commit_polls": polls,
        "dispatched_s": dispatched,
        "dispatch_polls": dispatch_polls,
        "response_s": answer.get("t", time.perf_counter()) - t0,
        "done_s": _finished_span(wf, start),
        "status": status,
        "rate": step_rate(wf, start),
    }
