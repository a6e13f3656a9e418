"""Scenario "people" (issue 26): triggers that name recipients.

(a) **List fan-out.** One trigger to an N-member list (100,000 full / 1,000 quick); a
real worker node (``-Q notifyflow.default``, the fan-out job's queue) runs the job: instances/s
= created / (FanOut.created_at -> finished_at), which includes the request's own
transaction, the worker's pick-up, the membership snapshot, every batch (INSERT ... ON
CONFLICT with its audit rows) and the publish of every first step. Reference in the same
run: a bare ``TriggerInstance.objects.bulk_create`` of the same rows (same table, same
indexes, batch 2,000, no audit rows, no publish), in this process. Target >= 20,000/s.

(b) **POST /triggers/ with 100 inline recipients** through gunicorn (``-w 2``, 2 client
threads, bodies built before the clock starts): instances/s = instances created / wall
time. Reference: ``POST /triggers/bulk/`` with 100 payload-only items, same gunicorn,
alternating rounds. Target >= 3,000 instances/s. No worker runs while it is timed (as
scenario 1); the instances are closed out afterwards, not drained.

(c) **The list's instances drained.** The bench's usual worker nodes (2 x ``-P solo``,
here consuming every queue as a plain worker does, so one of them runs the
fan-out job too; ``NOTIFYFLOW_PUBLIC_URL`` set) are idle when one trigger to the
N-member list is made (another key); every instance runs its single email node, sent to
its recipient's address (from the claim's join) with the unsubscribe link in the body
and the List-Unsubscribe headers, built by the null backend. steps/s = N / (the trigger
call -> the last instance's ``finished_at``): the fan-out and the drain together.
Reference in the same run, same workers and command: the execution scenario's step on a
single-node email workflow, payload-only (``to`` from the payload, no recipient), N
instances preloaded and drained in two halves, one before and one after the app's drain
(a neighbour's changing load weighs on both), steps/s as scenario 2 measures it (first
step started -> last finished, summed over the halves). Target: >= 90 % of the
reference.

``BENCH_PEOPLE_N`` overrides N; ``BENCH_PEOPLE_PARTS`` (``fanout,inline,drain``) picks
parts.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from typing import Any

from django.db import connection
from django.db.models import Max
from django.utils import timezone

from bench.infra import QUEUES, free_port
from bench.scenarios.common import EMAIL, PAYLOAD, Ctx, chain, flush_broker, verdict
from bench.scenarios.drain import close_out, step_rate, wait_terminal
from notifyflow.ids import uuid7
from recipients.models import RecipientList
from triggers.dispatch import dispatch_many_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, trigger_create_for_recipients
from workflows.services import workflow_save

WORKFLOW = "bench-people"
# The people-first email: no ``to`` (the recipient's address), the unsubscribe link.
PEOPLE_EMAIL = {
    "subject": EMAIL["subject"],
    "body": EMAIL["body"] + " Unsubscribe: {{ unsubscribe_url }}",
}
# The drain's reference: the execution scenario's email node, payload-only.
REF_WORKFLOW = "bench-people-ref"
DRAIN_TARGET = "people: list of N single-email instances drained, steps/s"
DRAIN_TARGET_RATIO = 0.9
# A plain worker's queues (steps and fan-out jobs), and what an email to a recipient needs.
DRAIN_QUEUES = ",".join(QUEUES)
DRAIN_ENV = {"NOTIFYFLOW_PUBLIC_URL": "http://127.0.0.1:8000"}
FANOUT_TARGET = "people: list fan-out instances/s"
FANOUT_TARGET_RATE = 20_000.0
INLINE_TARGET = "people: POST /triggers/ with 100 inline recipients, instances/s"
INLINE_TARGET_RATE = 3_000.0
PER_REQUEST = 100


def _members(n: int, key: str) -> None:
    """N recipients with an email and their memberships of list ``key``, set-based."""
    group = RecipientList.objects.create(key=key, name=key)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO recipients_recipient (id, email, properties, preferences, created_at,"
            " updated_at, feed_token_generation) SELECT 'member-' || g,"
            " 'member' || g || '@example.com', '{}', '{}', now(), now(),"
            " floor(random() * 1e15)::bigint + 1 FROM generate_series(1, %s) g"
            " ON CONFLICT DO NOTHING",
            [n],
        )
        cur.execute(
            "INSERT INTO recipients_listmembership (list_id, recipient_id, created_at)"
            " SELECT %s, 'member-' || g, now() FROM generate_series(1, %s) g",
            [group.pk, n],
        )
        cur.execute("ANALYZE recipients_recipient; ANALYZE recipients_listmembership")


def _reference_bulk_create(wf: Any, n: int) -> float:
    """Bare bulk_create of the fan-out's rows (another key): instances/s."""
    now = timezone.now()
    version = wf.current_version
    rows = [
        TriggerInstance(
            id=uuid7(),
            workflow_id=wf.pk,
            workflow_version_id=version.pk,
            idempotency_key="reference",
            payload=PAYLOAD,
            status=TriggerStatus.ENQUEUED,
            current_node_id="e1",
            vars={},
            available_at=now,
            dispatched_at=now,
            recipient_id=f"member-{g}",
        )
        for g in range(1, n + 1)
    ]
    started = time.perf_counter()
    TriggerInstance.objects.bulk_create(rows, batch_size=2000)
    return n / (time.perf_counter() - started)


def _trigger_list(wf: Any, prefix: str) -> Any:
    """One trigger to the whole list (the service the POST calls): its fan-out."""
    result = trigger_create_for_recipients(
        workflow=wf.key,
        idempotency_key=f"{prefix}-{uuid.uuid4().hex[:6]}",
        payload=PAYLOAD,
        recipients=[RecipientEntry(list_key="bench-everyone")],
        actor="bench",
    )
    assert result.fanout is not None
    return result.fanout


def _fanout(ctx: Ctx, wf: Any, n: int) -> dict[str, Any]:
    workers = ctx.procs.celery_workers(1, tag="fanout", queues="notifyflow.default")
    try:
        fanout = _trigger_list(wf, "fanout")
        deadline = time.monotonic() + ctx.sizes.drain_timeout_s
        while not FanOut.objects.filter(pk=fanout.pk, status="done").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("fan-out did not finish in time")
            if not workers[0].alive():
                raise RuntimeError(f"fan-out worker died:\n{workers[0].tail()}")
            time.sleep(0.05)
    finally:
        ctx.procs.stop_workers(workers)
    job = FanOut.objects.get(pk=fanout.pk)
    assert job.finished_at is not None
    span = (job.finished_at - job.created_at).total_seconds()
    if job.created != n:
        raise RuntimeError(f"fan-out created {job.created} of {n}")
    return {"n": n, "span_s": span, "instances_per_s": n / span if span else 0.0}


def _drain_reference(ctx: Ctx, ref: Any, n: int) -> dict[str, Any]:
    """N payload-only single-email instances, preloaded (one INSERT and one pipelined
    publish per chunk), then drained by the same two worker nodes: steps/s as scenario 2
    measures it (first step started -> last finished)."""
    flush_broker()
    since = timezone.now()
    version = ref.current_version
    for start in range(0, n, 5000):
        now = timezone.now()
        rows = [
            TriggerInstance(
                id=uuid7(),
                workflow_id=ref.pk,
                workflow_version_id=version.pk,
                idempotency_key=f"ref-{uuid.uuid4().hex[:6]}-{g}",
                payload=PAYLOAD,
                status=TriggerStatus.ENQUEUED,
                current_node_id="e1",
                vars={},
                available_at=now,
                dispatched_at=now,
            )
            for g in range(start, min(n, start + 5000))
        ]
        TriggerInstance.objects.bulk_create(rows, batch_size=1000)
        dispatch_many_on_commit((row.id, row.lane) for row in rows)  # no transaction: now
    workers = ctx.procs.celery_workers(
        2, tag="people-ref", queues=DRAIN_QUEUES, extra_env=DRAIN_ENV
    )
    try:
        status = wait_terminal(ref, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
    finally:
        ctx.procs.stop_workers(workers)
    return {**status, **step_rate(ref, since)}


def _combined(*halves: dict[str, Any]) -> dict[str, Any]:
    """The reference's halves as one drain: steps over the sum of their spans."""
    steps = sum(h["steps"] for h in halves)
    span = sum(h["span_s"] for h in halves)
    return {
        "finished": sum(h["finished"] for h in halves),
        "failed": sum(h["failed"] for h in halves),
        "steps": steps,
        "span_s": span,
        "steps_per_s": steps / span if span else 0.0,
        "halves": list(halves),
    }


def _drain_people(ctx: Ctx, wf: Any, n: int) -> dict[str, Any]:
    """Two idle worker nodes; one trigger to the list; time until the last instance of
    it has finished its email step."""
    flush_broker()
    workers = ctx.procs.celery_workers(
        2, tag="people-drain", queues=DRAIN_QUEUES, extra_env=DRAIN_ENV
    )
    try:
        posted = timezone.now()
        fanout = _trigger_list(wf, "drain")
        status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=posted, procs=workers)
    finally:
        ctx.procs.stop_workers(workers)
    last = TriggerInstance.objects.filter(workflow=wf, created_at__gte=posted).aggregate(
        last=Max("finished_at")
    )["last"]
    span = (last - posted).total_seconds()
    job = FanOut.objects.get(pk=fanout.pk)
    fanout_s = (job.finished_at - job.created_at).total_seconds() if job.finished_at else None
    return {
        **status,
        "span_s": span,
        "steps_per_s": n / span if span else 0.0,
        "fanout_s": fanout_s,
        "steps_only": step_rate(wf, posted),
    }


def _bodies(kind: str, prefix: str, requests: int) -> list[bytes]:
    out = []
    for r in range(requests):
        if kind == "app":
            body: dict[str, Any] = {
                "workflow": WORKFLOW,
                "idempotency_key": f"{prefix}-{r}",
                "payload": PAYLOAD,
                "recipients": [
                    {"id": f"{prefix}-{r}-{i}", "email": f"p{r}x{i}@example.com"}
                    for i in range(PER_REQUEST)
                ],
            }
        else:
            body = {
                "items": [
                    {
                        "workflow": WORKFLOW,
                        "idempotency_key": f"{prefix}-{r}-{i}",
                        "payload": PAYLOAD,
                    }
                    for i in range(PER_REQUEST)
                ]
            }
        out.append(json.dumps(body).encode())
    return out


def _post_all(port: int, path: str, token: str, bodies: list[bytes]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    queue = list(reversed(bodies))
    lock = threading.Lock()
    statuses: dict[int, int] = {}

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request("POST", path, body, headers)
                resp = conn.getresponse()
                resp.read()
            finally:
                conn.close()
            with lock:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1

    threads = [threading.Thread(target=worker) for _ in range(2)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ok = sum(count for code, count in statuses.items() if code in (200, 201))
    if ok != len(bodies):
        raise RuntimeError(f"{path}: not every request succeeded: {statuses}")
    return {"wall_s": wall, "instances": ok * PER_REQUEST}


def _inline(ctx: Ctx) -> dict[str, Any]:
    rounds, per_round = (1, 3) if ctx.quick else (3, 20)
    port = free_port()
    app = ctx.procs.gunicorn("gunicorn-people", port, workers=2)
    run = uuid.uuid4().hex[:6]
    totals = {"app": [0.0, 0], "reference": [0.0, 0]}
    try:
        # Warm-up (first-request imports, caches), not timed.
        _post_all(port, "/api/v1/triggers/", ctx.token, _bodies("app", f"warm-{run}", 1))
        for rnd in range(rounds):
            for kind, path in (
                ("reference", "/api/v1/triggers/bulk/"),
                ("app", "/api/v1/triggers/"),
            ):
                res = _post_all(
                    port, path, ctx.token, _bodies(kind, f"{kind}-{run}-{rnd}", per_round)
                )
                totals[kind][0] += res["wall_s"]
                totals[kind][1] += res["instances"]
    finally:
        ctx.procs.stop(app)
    return {
        kind: {"wall_s": wall, "instances": count, "instances_per_s": count / wall if wall else 0.0}
        for kind, (wall, count) in totals.items()
    }


def _parts() -> set[str]:
    raw = os.environ.get("BENCH_PEOPLE_PARTS", "fanout,inline,drain")
    return {part.strip() for part in raw.split(",") if part.strip()}


def scenario_people(ctx: Ctx) -> None:
    n = int(os.environ.get("BENCH_PEOPLE_N") or (1_000 if ctx.quick else 100_000))
    parts = _parts()
    wf = workflow_save(
        key=WORKFLOW,
        name=WORKFLOW,
        definition=chain([("e1", "email", PEOPLE_EMAIL)]),
        actor="bench",
    )
    ctx.workflows[WORKFLOW] = wf
    flush_broker()
    _members(n, "bench-everyone")
    out: dict[str, Any] = {"n": n, "parts": sorted(parts)}
    if "fanout" in parts:
        out["reference_bulk_create_per_s"] = _reference_bulk_create(wf, n)
        out["fanout"] = _fanout(ctx, wf, n)
        close_out(wf)
        flush_broker()
        _report_fanout(ctx, out, n)
    if "inline" in parts:
        out["inline"] = _inline(ctx)
        close_out(wf)
        flush_broker()
        _report_inline(ctx, out)
    if "drain" in parts:
        ref = workflow_save(
            key=REF_WORKFLOW,
            name=REF_WORKFLOW,
            definition=chain([("e1", "email", EMAIL)]),
            actor="bench",
        )
        # The reference in two halves, one before and one after the app's drain, so a
        # neighbour's load that changes during the run weighs on both alike; in one piece
        # in a quick run (a worker start and stop less: its 3-minute budget).
        halves = (n,) if ctx.quick else (n // 2, n - n // 2)
        before = _drain_reference(ctx, ref, halves[0])
        out["drain"] = _drain_people(ctx, wf, n)
        after = [_drain_reference(ctx, ref, half) for half in halves[1:]]
        out["drain_reference"] = _combined(before, *after)
        flush_broker()
        _report_drain(ctx, out, n)
    ctx.results["people"] = out


def _report_fanout(ctx: Ctx, out: dict[str, Any], n: int) -> None:
    rate, ref = out["fanout"]["instances_per_s"], out["reference_bulk_create_per_s"]
    ctx.row(
        "26 people",
        f"list fan-out of {n:,} members, instances/s (request -> job done)",
        f"{rate:.0f}",
        f"{ref:.0f} (bare bulk_create, {rate / ref:.0%})",
        f">= {FANOUT_TARGET_RATE:.0f}",
        verdict(rate >= FANOUT_TARGET_RATE),
    )
    ctx.target(
        FANOUT_TARGET,
        rate,
        FANOUT_TARGET_RATE,
        "instances/s",
        rate >= FANOUT_TARGET_RATE,
        f"{n:,} members; {rate / ref:.0%} of bare bulk_create ({ref:.0f}/s)",
    )


def _report_inline(ctx: Ctx, out: dict[str, Any]) -> None:
    app, bulk = (
        out["inline"]["app"]["instances_per_s"],
        out["inline"]["reference"]["instances_per_s"],
    )
    ctx.row(
        "26 people",
        f"POST /triggers/ with {PER_REQUEST} inline recipients, instances/s",
        f"{app:.0f}",
        f"{bulk:.0f} (triggers/bulk/ of {PER_REQUEST} payload-only items, {app / bulk:.0%})",
        f">= {INLINE_TARGET_RATE:.0f}",
        verdict(app >= INLINE_TARGET_RATE),
    )
    ctx.target(
        INLINE_TARGET,
        app,
        INLINE_TARGET_RATE,
        "instances/s",
        app >= INLINE_TARGET_RATE,
        f"{app / bulk:.0%} of triggers/bulk/ with {PER_REQUEST} payload-only items ({bulk:.0f}/s)",
    )


def _report_drain(ctx: Ctx, out: dict[str, Any], n: int) -> None:
    drain, ref = out["drain"], out["drain_reference"]
    for name, res in (("drain", drain), ("reference", ref)):
        if res["failed"]:
            raise RuntimeError(f"people {name}: {res['failed']} instances failed")
    rate, ref_rate = drain["steps_per_s"], ref["steps_per_s"]
    ratio = rate / ref_rate if ref_rate else 0.0
    ok = ratio >= DRAIN_TARGET_RATIO
    ctx.row(
        "26 people",
        f"one trigger to {n:,} members -> every email step done, steps/s (2 nodes)",
        f"{rate:.0f}",
        f"{ref_rate:.0f} (scenario 2's step, 1-node email workflow, payload-only, {ratio:.0%})",
        f">= {DRAIN_TARGET_RATIO:.0%} of ref",
        verdict(ok, f"{ratio:.0%}"),
    )
    ctx.row(
        "26 people",
        "  same: fan-out job s / steps only (first started -> last finished) steps/s",
        f"{drain['fanout_s']:.1f} s / {drain['steps_only']['steps_per_s']:.0f}",
    )
    # Issue 29: the same run in seconds - when the last email of the list was sent, and
    # the fan-out's own rate inside it - next to what the references' rates imply.
    bare = out.get("reference_bulk_create_per_s")
    fanout_rate = n / drain["fanout_s"] if drain["fanout_s"] else 0.0
    ctx.row(
        "26 people",
        "  same: trigger -> last email sent / fan-out job (instances/s, workers busy)",
        f"{drain['span_s']:.1f} s / {drain['fanout_s']:.1f} s ({fanout_rate:,.0f}/s)",
        f"{n / ref_rate:.1f} s at scenario 2's rate"
        + (f"; {n / bare:.1f} s bare bulk_create ({bare:,.0f}/s)" if bare else ""),
    )
    drain["last_email_s"] = drain["span_s"]
    drain["fanout_instances_per_s"] = fanout_rate
    ctx.target(
        DRAIN_TARGET,
        rate,
        DRAIN_TARGET_RATIO * ref_rate,
        "steps/s",
        ok,
        f"{n:,} members, trigger -> last finished; {ratio:.0%} of {ref_rate:.0f} steps/s "
        "(1-node email workflow, payload-only, same workers)",
    )
