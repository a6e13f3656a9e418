"""Scenario "status_webhooks" (issue 28): what a status event costs the step that emits
it, delivery included.

Two worker nodes (the bench's usual ``celery worker -P solo`` x 2, started once and
kept for the whole scenario) drain, in this order: webhooks part 1, reference part 1,
webhooks part 2, reference part 2 (a neighbour's changing load weighs on both sides
alike; the webhooks part first keeps the warm-up's endpoint, so only a change of
endpoints waits for the workers' 2 s cache). Each phase's instances are inserted first
(ORM ``bulk_create``, all due) and published in one pipeline while the nodes are idle.

- **The step**: a one-node workflow, ``email`` (the bench's null email backend): the
  step sends, records the delivery and completes the instance - it emits
  ``instance.completed``.
- **Reference**: no endpoint at all (the statement still carries the event's CTEs:
  what every step pays when nobody subscribes).
- **Webhooks**: one endpoint subscribed to ``instance.completed`` on a loopback HTTP
  receiver in this process (answers 204). The phase ends when every instance is
  finished AND every message is delivered (status ``delivered``) - when the
  deliverer is installed (``notifyflow.deliver_status_webhooks``); without it the
  messages stay pending and the figure is the write cost alone (said in the row).
  Steps/s = the phase's steps / (first step started -> the later of the last step
  finished and the last message delivered). Target: webhook steps/s >= reference /
  1.25 (issue 44; issue 28 asked 1.1). The CPU the two worker processes and our database's
  backends spent during a phase (delivery included), per step, comes from /proc.

Before the drains, in this process: **the statement with no endpoint**. The step's
one statement (fenced UPDATE, audit row) of ``state.transition`` processing ->
enqueued, timed with 0, 1 and 3 events' CTEs in it and no endpoint at all,
interleaved (one of each per instance in turn, prepared statements warmed first):
what the CTEs cost a step when nobody subscribes (median microseconds).

N = 4,000 per part (full) / 300 (quick); ``BENCH_WEBHOOKS_N`` overrides it;
``BENCH_WEBHOOKS_BATCH`` sets the deliverer's NOTIFYFLOW_STATUS_WEBHOOK_BATCH.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from django.db.models import Max, Min
from django.utils import timezone

from bench.infra import raise_if_any_died
from bench.scenarios.common import EMAIL, Ctx, chain, flush_broker, verdict
from bench.scenarios.drain import close_out, step_rate, wait_terminal
from bench.scenarios.gates import WARMUP, _cpu, _load, _pg_pids
from executions.models import StepExecutionLog
from notifyflow.celery import app
from status_webhooks import events as status_events
from status_webhooks.models import MessageStatus, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import DELIVER_TASK
from triggers import state
from triggers.dispatch import dispatch_many_on_commit
from triggers.models import TriggerStatus
from workflows.models import Workflow
from workflows.services import workflow_save

WF = "bench-webhooks"
DEFINITION = chain([("hello", "email", EMAIL)])
TARGET = "status webhooks: steps/s with an endpoint (delivered) >= no endpoint / 1.25"
RATIO = 1.25
# Workers kick the deliverer only once they see an active endpoint (cached 2 s).
ENDPOINT_CACHE_S = 2.5


class _Hook(asyncio.Protocol):
    """One connection to the receiver: reads each request's head and its
    ``Content-Length`` bytes of body, answers 204, keeps the connection open unless the
    request says ``Connection: close``."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self._answer_one():
            pass

    def _answer_one(self) -> bool:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return False
        head = self.buffer[:head_end].decode("latin-1").lower()
        length = int(_CONTENT_LENGTH.search(head).group(1)) if "content-length:" in head else 0
        end = head_end + 4 + length
        if len(self.buffer) < end:
            return False
        self.buffer = self.buffer[end:]
        self.receiver.count += 1
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        if "connection: close" in head:
            self.transport.close()
            return False
        return True


_CONTENT_LENGTH = re.compile(r"content-length:\s*(\d+)")


class Receiver:
    """A loopback endpoint answering 204 to every POST, counting them, on HTTP/1.1 so
    the deliverer's connections are kept alive (as a customer's endpoint would keep
    them).

    It stands for an endpoint on another machine, yet runs on the same two cores as the
    workers and the database: an asyncio protocol reading only the request's head and
    body length, so it takes as little of them as it can (``http.server``'s thread per
    connection and header parsing took ~150 us of CPU a POST, which the reference phase,
    with no endpoint, never pays). ``cpu_s()``: the CPU its thread has spent, reported
    beside the figures."""

    def __init__(self) -> None:
        self.count = 0
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(
                # A deliverer POSTs a whole claim at once: room for every connection.
                self.loop.create_server(lambda: _Hook(self), "127.0.0.1", 0, backlog=256)
            )
            started.set()
            self.loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        started.wait(10)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks"

    def cpu_s(self) -> float:
        """The CPU the receiver's thread has spent so far (read in that thread)."""

        async def read() -> float:
            return time.thread_time()

        return asyncio.run_coroutine_threadsafe(read(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


def _deliverer_installed() -> bool:
    app.loader.import_default_modules()
    return DELIVER_TASK in app.tasks


def _wait_delivered(ctx: Ctx, since: Any, n: int, workers: list[Any]) -> None:
    messages = WebhookMessage.objects.filter(created_at__gte=since)
    deadline = time.monotonic() + ctx.sizes.drain_timeout_s
    while True:
        written = messages.count()
        pending = messages.exclude(status=MessageStatus.DELIVERED).count()
        if written >= n and not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"webhooks: {written}/{n} written, {pending} not delivered")
        raise_if_any_died(workers)
        time.sleep(0.1)


def _phase(
    ctx: Ctx,
    workers: list[Any],
    wf: Workflow,
    n: int,
    prefix: str,
    *,
    receiver: Receiver | None,
    deliver: bool,
) -> dict[str, Any]:
    """One drain of ``n`` instances; with ``receiver``, an endpoint wants their events
    (and, ``deliver``, the phase lasts until all are delivered)."""
    wanted = [receiver.url] if receiver is not None else []
    if list(WebhookEndpoint.objects.values_list("url", flat=True)) != wanted:
        WebhookEndpoint.objects.all().delete()
        if receiver is not None:
            WebhookEndpoint.objects.create(
                url=receiver.url, event_types=["instance.completed"], secret="whsec_YmVuY2g="
            )
        time.sleep(ENDPOINT_CACHE_S)  # the workers' cached "any endpoint?" catches up
    since = timezone.now()
    ids = _load(wf, n, prefix)
    worker_pids = [proc.pid for proc in workers]
    pg_pids = _pg_pids()
    cpu0, pg0 = _cpu(worker_pids), _cpu(pg_pids)
    received0 = (receiver.count, receiver.cpu_s()) if receiver is not None else (0, 0.0)
    dispatch_many_on_commit((i, "normal") for i in ids)  # no transaction: one publish, now
    status = wait_terminal(wf, n, ctx.sizes.drain_timeout_s, since=since, procs=workers)
    if status["failed"]:
        raise RuntimeError(f"{wf.key}: {status['failed']} instances failed")
    if receiver is not None and deliver:
        _wait_delivered(ctx, since, n, workers)
    cpu1, pg1 = _cpu(worker_pids), _cpu(pg_pids)
    received = (receiver.count, receiver.cpu_s()) if receiver is not None else (0, 0.0)
    rate = step_rate(wf, since)
    steps = StepExecutionLog.objects.filter(workflow=wf, started_at__gte=since)
    window = steps.aggregate(first=Min("started_at"), last=Max("finished_at"))
    messages = WebhookMessage.objects.filter(created_at__gte=since)
    delivered_at = messages.aggregate(last=Max("delivered_at"))["last"]
    end = max(window["last"], delivered_at or window["last"])
    span = (end - window["first"]).total_seconds()
    count = rate["steps"] or 1
    return {
        **rate,
        "span_s": span,
        "steps_per_s": rate["steps"] / span if span else 0.0,
        "messages": messages.count(),
        "delivered": messages.filter(status=MessageStatus.DELIVERED).count(),
        "worker_cpu_ms_per_step": (cpu1 - cpu0) * 1000 / count,
        "pg_cpu_ms_per_step": (pg1 - pg0) * 1000 / count,
        "posts": received[0] - received0[0],
        "receiver_cpu_s": received[1] - received0[1],
    }


def _combined(*parts: dict[str, Any]) -> dict[str, Any]:
    steps = sum(p["steps"] for p in parts)
    span = sum(p["span_s"] for p in parts)

    def per_step(key: str) -> float:
        return sum(p[key] * p["steps"] for p in parts) / (steps or 1)

    return {
        "steps": steps,
        "span_s": span,
        "steps_per_s": steps / span if span else 0.0,
        "messages": sum(p["messages"] for p in parts),
        "delivered": sum(p["delivered"] for p in parts),
        "worker_cpu_ms_per_step": per_step("worker_cpu_ms_per_step"),
        "pg_cpu_ms_per_step": per_step("pg_cpu_ms_per_step"),
        "posts": sum(p["posts"] for p in parts),
        "receiver_cpu_s": sum(p["receiver_cpu_s"] for p in parts),
    }


def _statement_cost(wf: Workflow, rounds: int) -> dict[int, float]:
    """Median microseconds of a processing -> enqueued transition carrying the CTEs of
    0, 1 and 3 events, no endpoint existing; interleaved, after a warm-up."""
    WebhookEndpoint.objects.all().delete()
    kinds = (0, 1, 3)
    ids = _load(wf, (rounds + 20) * len(kinds), f"statement-{uuid.uuid4().hex[:6]}")
    timings: dict[int, list[float]] = {k: [] for k in kinds}
    for index, instance_id in enumerate(ids):
        kind = kinds[index % len(kinds)]
        claimed = state.claim(instance_id=instance_id, worker="bench", now=timezone.now())
        assert claimed is not None
        events = [
            status_events.step_skipped(
                instance_id=instance_id,
                workflow_key=wf.key,
                node_id="hello",
                node_type="email",
                reason="missing_channel_data",
            )
        ] * kind
        started = time.perf_counter()
        state.transition(
            instance_id=instance_id,
            from_status=TriggerStatus.PROCESSING,
            to_status=TriggerStatus.ENQUEUED,
            reason="bench",
            actor="bench",
            lease_token=claimed.lease_token,
            updates={"available_at": timezone.now() + timedelta(days=1)},
            events=events,
        )
        if index >= 20 * len(kinds):  # past the warm-up: prepared, plans cached
            timings[kind].append((time.perf_counter() - started) * 1e6)
    close_out(wf)
    return {kind: statistics.median(values) for kind, values in timings.items()}


def scenario_status_webhooks(ctx: Ctx) -> None:
    n = int(os.environ.get("BENCH_WEBHOOKS_N") or (300 if ctx.quick else 4_000))
    wf = workflow_save(key=WF, name=WF, definition=DEFINITION, actor="bench")
    ctx.workflows[WF] = wf
    statement = _statement_cost(wf, 300 if ctx.quick else 2_000)
    deliver = _deliverer_installed()
    receiver = Receiver()
    flush_broker()
    run = uuid.uuid4().hex[:6]
    # The deliverer may only call the loopback receiver.
    env = {"NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS": f"127.0.0.1:{receiver.port}"}
    if os.environ.get("BENCH_WEBHOOKS_BATCH"):  # the deliverer's claim size, to compare
        env["NOTIFYFLOW_STATUS_WEBHOOK_BATCH"] = os.environ["BENCH_WEBHOOKS_BATCH"]
    workers = ctx.procs.celery_workers(2, tag="webhooks", extra_env=env)
    try:
        _phase(ctx, workers, wf, WARMUP, f"warmup-{run}", receiver=receiver, deliver=deliver)
        parts = []
        # Two alternating rounds of each, one in the quick run (its 3-minute budget). The
        # endpoint's phase first: it keeps the warm-up's endpoint, with no cache wait.
        for part in (1,) if ctx.quick else (1, 2):
            for hooks in (True, False):
                parts.append(
                    _phase(
                        ctx,
                        workers,
                        wf,
                        n,
                        f"{'hooks' if hooks else 'ref'}{part}-{run}",
                        receiver=receiver if hooks else None,
                        deliver=deliver,
                    )
                )
    finally:
        ctx.procs.stop_workers(workers)
        receiver.close()
        WebhookEndpoint.objects.all().delete()
    flush_broker()
    out = {
        "n": n,
        "deliverer_batch": os.environ.get("BENCH_WEBHOOKS_BATCH") or "default",
        "statement_us": statement,
        "deliverer": deliver,
        "posts_received": receiver.count,
        "parts": parts,
        "reference": _combined(*parts[1::2]),
        "webhooks": _combined(*parts[0::2]),
    }
    ctx.results["status_webhooks"] = out
    _report(ctx, out)


def _report(ctx: Ctx, out: dict[str, Any]) -> None:
    us = out["statement_us"]
    ctx.row(
        "28 webhooks",
        "transition statement, no endpoint: with 1 / 3 events' CTEs, us (median)",
        f"{us[1]:.0f} / {us[3]:.0f}",
        f"{us[0]:.0f} (no event CTEs; +{us[1] - us[0]:.0f} / +{us[3] - us[0]:.0f} us)",
    )
    app_, ref = out["webhooks"], out["reference"]
    rate, ref_rate = app_["steps_per_s"], ref["steps_per_s"]
    cost = ref_rate / rate if rate else float("inf")
    ok = rate >= ref_rate / RATIO
    what = (
        f"{app_['delivered']:,} of {app_['messages']:,} delivered"
        if out["deliverer"]
        else f"{app_['messages']:,} written; no deliverer installed: write cost alone"
    )
    ctx.row(
        "28 webhooks",
        f"{2 * out['n']:,} one-email instances, endpoint on instance.completed, steps/s",
        f"{rate:.0f}",
        f"{ref_rate:.0f} (same workflow, no endpoint; {cost:.2f}x)",
        f">= ref / {RATIO}",
        verdict(ok, f"{(cost - 1) * 100:+.1f} %"),
    )
    ctx.row("28 webhooks", "  same: messages", what)
    ctx.row(
        "28 webhooks",
        "  same: CPU ms per step, worker + pg (reference)",
        f"{app_['worker_cpu_ms_per_step']:.2f} + {app_['pg_cpu_ms_per_step']:.2f}",
        f"{ref['worker_cpu_ms_per_step']:.2f} + {ref['pg_cpu_ms_per_step']:.2f}",
    )
    posts = app_["posts"]
    ctx.row(
        "28 webhooks",
        "  same: the loopback receiver's CPU per POST (same cores, not in the figures above)",
        f"{app_['receiver_cpu_s'] * 1e6 / posts:.0f} us" if posts else "-",
        f"{posts:,} POSTs",
    )
    ctx.target(
        TARGET,
        rate,
        ref_rate / RATIO,
        "steps/s",
        ok,
        f"{(cost - 1) * 100:+.1f} % vs no endpoint ({ref_rate:.0f} steps/s, same run, same 2 "
        f"nodes); {what}",
    )
