"""Scenario "push_fanout" (issue 41): a 100,000-recipient push via list fan-out.

Requirement: "A 100,000-recipient push (list fan-out) finishes at >= the plain execution
rate, with the number of TLS connections opened reported (target: per worker process,
not per device)."

**The app.** N recipients (100,000 full / 1,000 quick; ``BENCH_PUSH_FANOUT_N``
overrides), each a member of one list and with ONE Android device (a ``PushDevice``,
provider ``fcm``, a token of its own). A workflow with one ``push`` node (scenario 41's
config: title, body, url, data, collapse key). The usual 2 worker nodes (``-P solo``,
one process each, consuming every queue as a plain worker does, so one of them runs the
fan-out job too) are idle when one trigger to the list is made; every instance's push
step sends through the real FCM client (google-auth's cached token, the kept-alive
HTTP/1.1 client over TLS) to the FCM fake of the test suite (``tests/fake_push.py``),
which runs in a process of its own (``bench.push_fakes``, via scenario 41's ``Fakes``).
The workers reach it through their environment: ``NOTIFYFLOW_FCM_CREDENTIALS`` (the
service account's key, whose ``token_uri`` is the fake's token endpoint),
``NOTIFYFLOW_FCM_URL`` and ``SSL_CERT_FILE`` (the fakes' CA). instances/s = N / (the
trigger call -> the last instance's ``finished_at``): the fan-out and the drain
together, as people's drain.

**The reference ("the plain execution rate").** What people's drain (issue 26) compares
against, in the same run: scenario 2's step on a single-node ``email`` workflow,
payload-only (``to`` from the payload, no recipient), sent to the bench's null email
backend, so nothing goes to a provider. N instances preloaded (one INSERT and one
pipelined publish per chunk) and drained by the same 2 worker nodes, same command and
environment (the FCM variables too); steps/s = instances/s as scenario 2 measures it
(first step started -> last finished, over the halves). In two halves, one drained before
and one after the app's (a neighbour's changing load weighs on both); in one piece in a
quick run. The reference excludes the fan-out (its instances are preloaded) while the
app's figure includes it, so the comparison is conservative; the push steps' own rate
(first started -> last finished) is printed beside it.

Also reported: the TLS connections the FCM fake accepted over the whole push drain next
to the number of worker processes (target: one per worker process, whatever N); the
messages the FCM fake received (must equal N: the scenario fails otherwise); CPU seconds
of the worker processes and of the fakes' process over the push drain (is the fake the
bottleneck?).
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import Max
from django.utils import timezone

from bench.infra import QUEUES, Proc, child_pids
from bench.scenarios.common import EMAIL, PAYLOAD, Ctx, chain, flush_broker, verdict
from bench.scenarios.drain import step_rate, wait_terminal
from bench.scenarios.push import DEFINITIONS, Fakes
from notifyflow.ids import uuid7
from recipients.models import PushDevice, RecipientList
from triggers.dispatch import dispatch_many_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, trigger_create_for_recipients
from workflows.services import workflow_save

WORKFLOW = "bench-push-fanout"
REF_WORKFLOW = "bench-push-fanout-ref"
LIST_KEY = "bench-push-everyone"
MEMBER = "pushfan-"
WORKERS = 2
DRAIN_QUEUES = ",".join(QUEUES)
TARGET = "push: 100,000-recipient push via list fan-out, instances/s >= plain execution rate"
# TLS connections the FCM fake may accept per worker process (one each, kept alive).
TLS_PER_PROCESS = 2
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The push node's template reads payload.order and payload.eta (scenario 41's payload).
FANOUT_PAYLOAD = {**PAYLOAD, "order": 42, "eta": "Tuesday"}


def _members(n: int) -> None:
    """N recipients, their memberships of the list (set-based, as people's) and one FCM
    device each (bulk_create, as scenario 41's)."""
    group = RecipientList.objects.create(key=LIST_KEY, name=LIST_KEY)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO recipients_recipient (id, email, properties, preferences, created_at,"
            " updated_at, feed_token_generation) SELECT %s || g,"
            " %s || g || '@example.com', '{}', '{}', now(), now(),"
            " floor(random() * 1e15)::bigint + 1 FROM generate_series(1, %s) g"
            " ON CONFLICT DO NOTHING",
            [MEMBER, MEMBER, n],
        )
        cur.execute(
            "INSERT INTO recipients_listmembership (list_id, recipient_id, created_at)"
            " SELECT %s, %s || g, now() FROM generate_series(1, %s) g",
            [group.pk, MEMBER, n],
        )
    for start in range(1, n + 1, 10_000):
        PushDevice.objects.bulk_create(
            [
                PushDevice(recipient_id=f"{MEMBER}{g}", provider="fcm", token=f"pf-{g}:APA91b")
                for g in range(start, min(n, start + 9_999) + 1)
            ],
            batch_size=2000,
        )
    with connection.cursor() as cur:
        cur.execute(
            "ANALYZE recipients_recipient; ANALYZE recipients_listmembership;"
            " ANALYZE recipients_pushdevice"
        )


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _processes(workers: list[Proc]) -> list[int]:
    """Every process of the worker nodes: the node and its pool's children (none with
    ``-P solo``: one process per node)."""
    return [pid for w in workers for pid in (w.pid, *child_pids(w.pid))]


def _drain_reference(ctx: Ctx, ref: Any, n: int, env: dict[str, str]) -> dict[str, Any]:
    """N payload-only single-email instances, preloaded, then drained by the same worker
    nodes: steps/s as scenario 2 measures it (first step started -> last finished)."""
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
        WORKERS, tag="pushfan-ref", queues=DRAIN_QUEUES, extra_env=env
    )
    try:
        cpu0 = sum(_cpu_s(pid) for pid in _processes(workers))
        status = wait_terminal(ref, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
        cpu = sum(_cpu_s(pid) for pid in _processes(workers)) - cpu0
    finally:
        ctx.procs.stop_workers(workers)
    return {**status, **step_rate(ref, since), "worker_cpu_s": cpu}


def _combined(*halves: dict[str, Any]) -> dict[str, Any]:
    steps = sum(h["steps"] for h in halves)
    span = sum(h["span_s"] for h in halves)
    return {
        "finished": sum(h["finished"] for h in halves),
        "failed": sum(h["failed"] for h in halves),
        "steps": steps,
        "span_s": span,
        "steps_per_s": steps / span if span else 0.0,
        "worker_cpu_s": sum(h["worker_cpu_s"] for h in halves),
        "halves": list(halves),
    }


def _drain_push(ctx: Ctx, wf: Any, n: int, env: dict[str, str], fakes: Fakes) -> dict[str, Any]:
    """Idle worker nodes; one trigger to the list; time until the last instance of it has
    finished its push step. Then the fakes are stopped: what they saw."""
    flush_broker()
    workers = ctx.procs.celery_workers(WORKERS, tag="pushfan", queues=DRAIN_QUEUES, extra_env=env)
    try:
        pids = _processes(workers)
        cpu0 = {pid: _cpu_s(pid) for pid in pids}
        fake0 = _cpu_s(fakes.process.pid)
        posted = timezone.now()
        t0 = time.monotonic()
        result = trigger_create_for_recipients(
            workflow=wf.key,
            idempotency_key=f"push-fanout-{uuid.uuid4().hex[:6]}",
            payload=FANOUT_PAYLOAD,
            recipients=[RecipientEntry(list_key=LIST_KEY)],
            actor="bench",
        )
        assert result.fanout is not None
        status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=posted, procs=workers)
        wall = time.monotonic() - t0
        pids = _processes(workers)
        worker_cpu = sum(_cpu_s(pid) - cpu0.get(pid, 0.0) for pid in pids)
        fake_cpu = _cpu_s(fakes.process.pid) - fake0
    finally:
        ctx.procs.stop_workers(workers)
    last = TriggerInstance.objects.filter(workflow=wf, created_at__gte=posted).aggregate(
        last=Max("finished_at")
    )["last"]
    span = (last - posted).total_seconds()
    job = FanOut.objects.get(pk=result.fanout.pk)
    fanout_s = (job.finished_at - job.created_at).total_seconds() if job.finished_at else None
    return {
        **status,
        "span_s": span,
        "instances_per_s": n / span if span else 0.0,
        "fanout_s": fanout_s,
        "fanout_created": job.created,
        "steps_only": step_rate(wf, posted),
        "worker_processes": len(pids),
        "worker_cpu_s": worker_cpu,
        "fakes_cpu_s": fake_cpu,
        "wall_s": wall,
    }


def scenario_push_fanout(ctx: Ctx) -> None:
    n = int(os.environ.get("BENCH_PUSH_FANOUT_N") or (1_000 if ctx.quick else 100_000))
    started = time.monotonic()
    wf = workflow_save(
        key=WORKFLOW,
        name=WORKFLOW,
        definition=chain([("send", "push", DEFINITIONS["push"])]),
        actor="bench",
    )
    ref = workflow_save(
        key=REF_WORKFLOW,
        name=REF_WORKFLOW,
        definition=chain([("e1", "email", EMAIL)]),
        actor="bench",
    )
    ctx.workflows[WORKFLOW], ctx.workflows[REF_WORKFLOW] = wf, ref
    flush_broker()
    _members(n)
    previous_ca = os.environ.get("SSL_CERT_FILE")
    out: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(prefix="bench-push-fanout-") as directory:
        fakes = Fakes(Path(directory))  # sets SSL_CERT_FILE in this process's environment
        try:
            env = {
                "NOTIFYFLOW_FCM_CREDENTIALS": str(fakes.settings["NOTIFYFLOW_FCM_CREDENTIALS"]),
                "NOTIFYFLOW_FCM_URL": str(fakes.settings["NOTIFYFLOW_FCM_URL"]),
                "SSL_CERT_FILE": os.environ["SSL_CERT_FILE"],
                "NOTIFYFLOW_PUBLIC_URL": str(fakes.settings["NOTIFYFLOW_PUBLIC_URL"]),
            }
            # The reference in two halves around the app's drain (one piece when quick).
            halves = (n,) if ctx.quick else (n // 2, n - n // 2)
            before = _drain_reference(ctx, ref, halves[0], env)
            out["push"] = _drain_push(ctx, wf, n, env, fakes)
        finally:
            fakes.close()
        out["fakes_saw"] = fakes.seen
        after = [_drain_reference(ctx, ref, half, env) for half in halves[1:]]
    if previous_ca is None:
        os.environ.pop("SSL_CERT_FILE", None)
    else:
        os.environ["SSL_CERT_FILE"] = previous_ca
    out["reference"] = _combined(before, *after)
    out["total_s"] = time.monotonic() - started
    flush_broker()
    ctx.results["push_fanout"] = out
    _report(ctx, out, n)


def _report(ctx: Ctx, out: dict[str, Any], n: int) -> None:
    push, ref, seen = out["push"], out["reference"], out["fakes_saw"]
    for name, res in (("push", push), ("reference", ref)):
        if res["failed"]:
            raise RuntimeError(f"push_fanout {name}: {res['failed']} instances failed")
    received = (seen.get("received") or {}).get("fcm")
    tls = (seen.get("tls_connections") or {}).get("fcm")
    if received != n:
        raise RuntimeError(f"push_fanout: the FCM fake received {received} messages of {n}")
    procs = push["worker_processes"]
    rate, ref_rate = push["instances_per_s"], ref["steps_per_s"]
    ratio = rate / ref_rate if ref_rate else 0.0
    ok = ratio >= 1.0
    tls_ok = tls is not None and tls <= TLS_PER_PROCESS * procs
    steps_only = push["steps_only"]
    ctx.row(
        "41 push",
        f"one push to a {n:,}-member list (1 FCM device each) -> every push step done,"
        f" instances/s ({WORKERS} nodes)",
        f"{rate:.0f}",
        f"{ref_rate:.0f} (scenario 2's step, 1-node email workflow, payload-only, null"
        f" backend, {ratio:.0%})",
        ">= ref",
        verdict(ok, f"{ratio:.0%}"),
    )
    ctx.row(
        "41 push",
        "  same: trigger -> last push sent / fan-out job s / push steps only (first started"
        " -> last finished) steps/s",
        f"{push['span_s']:.1f} s / {push['fanout_s']:.1f} s / {steps_only['steps_per_s']:.0f}",
        f"{n / ref_rate:.1f} s at the reference's rate" if ref_rate else "",
    )
    ctx.row(
        "41 push",
        f"  same: TLS connections the FCM fake accepted, {n:,} sends",
        f"{tls}",
        f"{procs} worker processes ({tls / procs if tls is not None and procs else 0:.1f}"
        " per process)",
        f"<= {TLS_PER_PROCESS} per process",
        verdict(tls_ok),
    )
    ctx.row(
        "41 push",
        "  same: messages the FCM fake received",
        f"{received:,}",
        f"N = {n:,}",
        "= N",
        verdict(received == n),
    )
    ctx.row(
        "41 push",
        "  same: CPU s over the push drain: worker processes / fakes' process (wall s)",
        f"{push['worker_cpu_s']:.1f} / {push['fakes_cpu_s']:.1f} ({push['wall_s']:.1f})",
        f"reference's workers {ref['worker_cpu_s']:.1f} s for {ref['steps']:,} steps;"
        f" scenario total {out['total_s']:.0f} s",
    )
    ctx.target(
        TARGET,
        rate,
        ref_rate,
        "instances/s",
        ok,
        f"{n:,} recipients, trigger -> last finished, {ratio:.0%} of the plain step; FCM TLS"
        f" connections {tls} for {procs} worker processes; FCM fake received {received:,}",
    )
