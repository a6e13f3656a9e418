"""Scenario 6, running instances: events delivered to waiting instances (interest
overhead, fan-out, wake-up latency), next to the same rows written by hand."""

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

from bench.infra import free_port, redis_client
from bench.scenarios.common import (
    PAYLOAD,
    Ctx,
    close_out,
    combine,
    flush_broker,
    loadgen,
    ms,
    out_dir,
    park,
    stats_s,
    step_rate,
    verdict,
    wait_terminal,
)
from executions.models import StepExecutionLog
from notifyflow.celery import app as celery_app
from triggers.models import TriggerInstance
from workflows.models import Workflow

# --- 6. running instances: events delivered to waiting instances -----------------------

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


def _post_json(
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


def _interest_overhead(ctx: Ctx, port: int) -> dict[str, Any]:
    """POST /triggers/ to two identical workflows, one with two interests, alternating
    rounds (the one without interests first), same gunicorn, same payload."""
    sz = ctx.sizes
    run_id = uuid.uuid4().hex[:6]
    raw: dict[str, list[dict[str, Any]]] = {}
    for rnd in range(sz.ingest_rounds):
        for name, key in (("none", "bench-nointerests"), ("two", "bench-interests")):
            res = loadgen(
                port,
                "/api/v1/triggers/",
                ctx.token,
                key,
                "new",
                sz.ingest_s,
                sz.ingest_warmup_s,
                f"int-{name}-{run_id}-{rnd}",
                extra=("--order",),
            )
            if res["ok"] == 0:
                raise RuntimeError(f"interest overhead {name}: nothing succeeded: {res}")
            raw.setdefault(name, []).append(res)
    out: dict[str, Any] = {k: combine(v) for k, v in raw.items()}
    from triggers.inbox_models import Interest

    wf = ctx.workflows["bench-interests"]
    made = TriggerInstance.objects.filter(workflow=wf).count()
    rows = Interest.objects.filter(instance__workflow=wf).count()
    if made == 0 or rows != 2 * made:
        raise RuntimeError(f"interest overhead: {rows} interest rows for {made} instances")
    out["interest_rows"] = rows
    for key in ("bench-interests", "bench-nointerests"):
        close_out(ctx.workflows[key])
    return out


def _profile_delivery(ctx: Ctx, n: int) -> dict[str, Any]:
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


def _fanout_reference(ctx: Ctx, n: int, workers: list[Any]) -> dict[str, Any]:
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
                queued = r.lrange("celery", -500, -1)
                inflight = r.hvals("unacked")
                if not any(marker in m for m in queued) and not any(marker in m for m in inflight):
                    return time.perf_counter() - t0, polls
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("fan-out: next steps not all dispatched after 300 s")
            time.sleep(0.005)


def _fanout(ctx: Ctx, port: int, n: int, workers: list[Any]) -> dict[str, Any]:
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
            answer["status"], answer["body"] = _post_json(port, "/api/v1/events/", ctx.token, body)
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


def _wakeup_latency(ctx: Ctx, port: int, workers: list[Any]) -> dict[str, Any]:
    """Open loop, workers idle: an event to one parked instance (subject instance:<id>)
    every 1/rate s, and half-way between two of them a POST /triggers/ of a new instance
    of the same workflow (the reference: API -> first step started, same broker hop)."""
    from triggers.inbox_models import InboxEvent

    sz = ctx.sizes
    wf = ctx.workflows["bench-wakeup"]
    tag = uuid.uuid4().hex[:6]
    ids = park(wf, sz.wake_n, f"wake-{tag}", None)
    ref_prefix = f"wakeref-{tag}"
    sent: dict[Any, float] = {}
    ref_sent: dict[str, float] = {}
    behind = 0.0
    t0 = time.monotonic()
    for i, instance_id in enumerate(ids):
        for half, kind in ((0.0, "event"), (0.5, "trigger")):
            pause = t0 + (i + half) / sz.wake_per_s - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                behind = max(behind, -pause)
            at = time.time()
            if kind == "event":
                code, data = _post_json(
                    port,
                    "/api/v1/events/",
                    ctx.token,
                    {
                        "name": "go",
                        "event_id": f"{tag}-{i}",
                        "context": {"n": i},
                        "subjects": [f"instance:{instance_id}"],
                    },
                )
                if code != 202 or data.get("delivered") != 1:
                    raise RuntimeError(f"wake event {i}: {code} {data}")
                sent[instance_id] = at
            else:
                key = f"{ref_prefix}-{i}"
                code, data = _post_json(
                    port,
                    "/api/v1/triggers/",
                    ctx.token,
                    {"workflow": wf.key, "idempotency_key": key, "payload": PAYLOAD},
                )
                if code != 201:
                    raise RuntimeError(f"wake reference {i}: {code} {data}")
                ref_sent[key] = at
    # The woken instances complete; the reference ones park at the wait (first step).
    wait_terminal(wf, sz.wake_n, sz.drain_timeout_s, procs=workers)
    ref_rows = dict(
        TriggerInstance.objects.filter(workflow=wf, idempotency_key__startswith=ref_prefix)
        .values_list("id", "created_at")
        .order_by()
    )
    ref_keys = dict(
        TriggerInstance.objects.filter(pk__in=ref_rows).values_list("id", "idempotency_key")
    )
    deadline = time.monotonic() + sz.drain_timeout_s
    first: dict[Any, datetime] = {}
    while time.monotonic() < deadline:
        first = {}
        for trigger_id, started_at in StepExecutionLog.objects.filter(
            trigger_id__in=list(ref_rows), node_id="w"
        ).values_list("trigger_id", "started_at"):
            if trigger_id not in first or started_at < first[trigger_id]:
                first[trigger_id] = started_at
        if len(first) >= len(ref_rows):
            break
        time.sleep(0.1)
    else:
        raise RuntimeError(f"wake reference: {len(first)}/{len(ref_rows)} first steps ran")
    received = dict(
        InboxEvent.objects.filter(instance_id__in=ids, event_id__startswith=tag).values_list(
            "instance_id", "received_at"
        )
    )
    consumed = dict(
        StepExecutionLog.objects.filter(
            trigger_id__in=ids, node_id="w", success=True, output__received=True
        ).values_list("trigger_id", "started_at")
    )
    lat = [(consumed[t] - received[t]).total_seconds() for t in received if t in consumed]
    if len(lat) != sz.wake_n:
        raise RuntimeError(f"wake latency measured for {len(lat)} of {sz.wake_n}")
    client = [consumed[t].timestamp() - sent[t] for t in consumed if t in sent]
    ref_lat = [(first[t] - ref_rows[t]).total_seconds() for t in first]
    ref_client = [first[t].timestamp() - ref_sent[ref_keys[t]] for t in first]
    close_out(wf)
    return {
        "instances": sz.wake_n,
        "events_per_s": sz.wake_per_s,
        "max_behind_schedule_s": behind,
        "event_to_step": stats_s(lat),
        "post_sent_to_step": stats_s(client),
        "reference_created_to_first_step": stats_s(ref_lat),
        "reference_post_sent_to_first_step": stats_s(ref_client),
    }


def scenario_running(ctx: Ctx) -> None:
    sz = ctx.sizes
    n = sz.fanout_n
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 2)
        mark = now

    flush_broker()
    tag = uuid.uuid4().hex[:6]
    park(ctx.workflows["bench-fanout"], n, f"fan-{tag}", "campaign:1")
    park(ctx.workflows["bench-fanout-ref"], n, f"fanref-{tag}", "campaign:ref")
    park(ctx.workflows["bench-fanout-prof"], n, f"fanprof-{tag}", "campaign:prof")
    with connection.cursor() as cur:
        cur.execute("ANALYZE triggers_triggerinstance")
        cur.execute("ANALYZE triggers_interest")
    port = free_port()
    phase("park")
    app = ctx.procs.gunicorn("gunicorn-running", port, workers=2)
    phase("gunicorn_start")
    workers: list[Any] = []
    try:
        # No workers yet: the POSTs' first messages pile up in the broker, as in #1.
        overhead = _interest_overhead(ctx, port)
        phase("interest_overhead")
        profile = _profile_delivery(ctx, n)
        phase("delivery_profile")
        flush_broker()
        workers = ctx.procs.celery_workers(2, tag="running")
        phase("workers_start")
        ref = _fanout_reference(ctx, n, workers)
        phase("fanout_reference")
        fan = _fanout(ctx, port, n, workers)
        phase("fanout")
        wake = _wakeup_latency(ctx, port, workers)
        phase("wakeup_latency")
    finally:
        if workers:
            ctx.procs.stop_workers(workers)
        ctx.procs.stop(app)
    flush_broker()
    ctx.results["running"] = {
        "server": "gunicorn -k sync -w 2",
        "workers": "2 nodes x celery -P solo (-c 1), prefetch 1, acks_late",
        "fanout": {"instances": n, "app": fan, "reference": ref},
        "delivery_profile": profile,
        "interest_overhead": overhead,
        "wakeup": wake,
        "phase_s": phases,
    }
    ctx.row(
        "6 running",
        f"1 event -> {n} waiting: POST -> inbox committed",
        ms(fan["committed_s"]),
        f"{ms(ref['committed_s'])} (same rows + wake by hand, in-process)",
        "(no target)",
    )
    ctx.row(
        "6 running",
        f"  POST -> all {n} next steps dispatched (in the broker)",
        ms(fan["dispatched_s"]),
        f"{ms(ref['sent_s'])} (by hand, one producer)",
        "< 2 s",
        verdict(fan["dispatched_s"] < 2.0),
    )
    ctx.target(
        "1 event -> N waiting: inbox rows committed",
        ms(fan["committed_s"]),
        "< 2,000 ms",
        "",
        fan["committed_s"] < 2.0,
        f"N = {n}" + ("" if n >= 10_000 else " (quick size; target is for 10,000)"),
    )
    ctx.target(
        "1 event -> N waiting: all next steps dispatched",
        ms(fan["dispatched_s"]),
        "< 2,000 ms",
        "",
        fan["dispatched_s"] < 2.0,
        f"N = {n}; in the broker (DB marked + no wake task left)",
    )
    ctx.row(
        "6 running",
        f"  POST -> 202 (wake + {n} messages sent)",
        ms(fan["response_s"]) if not fan["failure"] else "FAILED (see warning)",
        f"{ms(ref['sent_s'])} (by hand, one producer)",
    )
    ratio = fan["done_s"] / ref["done_s"] if ref["done_s"] else 0.0
    ctx.row(
        "6 running",
        f"  POST -> all {n} next steps finished",
        f"{fan['done_s']:.2f} s",
        f"{ref['done_s']:.2f} s (by hand, same workers)",
        "(no target)",
        f"{ratio:.2f}x",
    )
    ctx.row(
        "6 running",
        f"  drain steps/s (wait + email, {2 * n} steps)",
        f"{fan['rate']['steps_per_s']:.0f}",
        f"{ref['rate']['steps_per_s']:.0f} (by hand)",
    )
    two, none = overhead["two"], overhead["none"]
    share = two["rps"] / none["rps"] if none["rps"] else 0.0
    ctx.row(
        "6 running",
        "POST /triggers/ req/s, 2 interests",
        f"{two['rps']:.0f}",
        f"{none['rps']:.0f} (same workflow, no interests)",
        "overhead <= 10%",
        verdict(share >= 0.9, f"{1 - share:+.1%} overhead"),
    )
    ctx.row(
        "6 running",
        "POST /triggers/ p50/p99, 2 interests",
        f"{two['p50_ms']:.1f} / {two['p99_ms']:.1f} ms",
        f"{none['p50_ms']:.1f} / {none['p99_ms']:.1f} ms",
    )
    ev, rf = wake["event_to_step"], wake["reference_created_to_first_step"]
    ctx.row(
        "6 running",
        f"event -> next step started p50/p99 ({sz.wake_n} at {sz.wake_per_s:.0f}/s)",
        f"{ms(ev['p50'])} / {ms(ev['p99'])}",
        f"{ms(rf['p50'])} / {ms(rf['p99'])} (POST /triggers/ -> 1st step)",
        "p99 < 1 s",
        verdict(ev["p99"] < 1.0),
    )
    ctx.target(
        "event -> next step started p99",
        ms(ev["p99"]),
        "< 1,000 ms",
        "",
        ev["p99"] < 1.0,
        f"{sz.wake_n} events at {sz.wake_per_s:.0f}/s; p50 {ms(ev['p50'])}",
    )
    if fan["failure"]:
        raise RuntimeError(fan["failure"])
