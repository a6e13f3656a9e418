"""Scenario 5, profiles: where a POST's and a step's time goes (py-spy,
pyinstrument, queries per step)."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.infra import ROOT, free_port
from bench.scenarios.common import PAYLOAD, Ctx, flush_broker, loadgen, out_dir
from bench.scenarios.drain import close_out, preload, wait_terminal
from executions import engine
from triggers.models import TriggerInstance
from triggers.services import trigger_create

# --- 5. profiles -----------------------------------------------------------------------


def summarize_collapsed(raw: Path, out: Path, top: int = 40) -> dict[str, Any]:
    """Top functions by self and inclusive samples from py-spy's collapsed stacks."""
    self_s: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = [
            f.split(" (")[0]
            + " ("
            + f.split(" (", 1)[1]
            .split(":")[0]
            .split("site-packages/")[-1]
            .replace(str(ROOT) + "/", "")
            + ")"
            if " (" in f
            else f
            for f in stack.split(";")
        ]
        self_s[frames[-1]] = self_s.get(frames[-1], 0) + count
        for f in set(frames):
            incl[f] = incl.get(f, 0) + count
    lines = [f"{raw.name}: {total} samples", "", "== self =="]

    def ranked(table: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(table.items(), key=lambda x: -x[1])[:top]

    lines += [f"{c / total:6.1%}  {f}" for f, c in ranked(self_s)]
    lines += ["", "== inclusive =="]
    lines += [f"{c / total:6.1%}  {f}" for f, c in ranked(incl)]
    out.write_text("\n".join(lines) + "\n")
    return {
        "samples": total,
        "inclusive_top": [
            (f, round(c / total, 3)) for f, c in sorted(incl.items(), key=lambda x: -x[1])[:top]
        ]
        if total
        else [],
    }


def py_spy(pid: int, duration: float, raw: Path, *, subprocesses: bool = False) -> bool:
    from bench.infra import VENV_BIN

    exe = VENV_BIN / "py-spy"
    if not exe.exists():
        print("    py-spy not installed (pip install -e '.[bench]'): skipping", flush=True)
        return False
    argv = [
        str(exe),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, int(duration))),
        "--rate",
        "200",
        "--format",
        "raw",
        "--output",
        str(raw),
        "--nonblocking",
    ]
    if subprocesses:
        argv.append("--subprocesses")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if done.returncode != 0 or not raw.exists():
        print(f"    py-spy failed: {done.stderr.strip()[-300:]}", flush=True)
        return False
    return True


def _queries_per_step(ctx: Ctx, profiles: Path) -> dict[str, Any]:
    from django.test import Client

    wf = ctx.workflows["bench-exec"]
    out: dict[str, Any] = {}
    report = []
    inst = trigger_create(
        workflow=wf, idempotency_key=f"q-{uuid.uuid4().hex}", payload=PAYLOAD
    ).instance
    for _ in range(3):
        node = TriggerInstance.objects.get(pk=inst.pk).current_node_id
        with CaptureQueriesContext(connection) as cq:
            what = engine.step_execute(instance_id=inst.pk, worker="bench-inproc")
        out[f"step_{node}"] = len(cq.captured_queries)
        report.append(f"== step_execute node {node} ({what}): {len(cq.captured_queries)} queries")
        report += [f"  {q['time']}s  {q['sql'][:300]}" for q in cq.captured_queries]
    # The production guard allows only DJANGO_ALLOWED_HOSTS (not the test client's
    # "testserver"): a refused host would answer 400 without touching the database.
    client = Client(HTTP_HOST="localhost")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ctx.token}"}
    body = {"workflow": "bench-exec", "payload": PAYLOAD}
    client.post(
        "/api/v1/triggers/",
        {**body, "idempotency_key": "warm"},
        content_type="application/json",
        **auth,
    )
    for mode, key in (("new", f"q-post-{uuid.uuid4().hex}"), ("repeat", "warm")):
        with CaptureQueriesContext(connection) as cq:
            resp = client.post(
                "/api/v1/triggers/",
                {**body, "idempotency_key": key},
                content_type="application/json",
                **auth,
            )
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"profile POST answered {resp.status_code}: {resp.content[:300]!r}")
        out[f"post_{mode}"] = len(cq.captured_queries)
        report.append(
            f"== POST /api/v1/triggers/ {mode} key ({resp.status_code}): "
            f"{len(cq.captured_queries)} queries"
        )
        report += [f"  {q['time']}s  {q['sql'][:300]}" for q in cq.captured_queries]
    (profiles / "queries.txt").write_text("\n".join(report) + "\n")
    return out


def _pyinstrument(ctx: Ctx, profiles: Path) -> None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("    pyinstrument not installed: skipping in-process profiles", flush=True)
        return
    from django.test import Client

    n = 40 if ctx.quick else 500
    # The production guard allows only DJANGO_ALLOWED_HOSTS (not the test client's
    # "testserver"): a refused host would answer 400 without touching the database.
    client = Client(HTTP_HOST="localhost")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ctx.token}"}
    tag = uuid.uuid4().hex[:6]
    prof = Profiler(interval=0.0005)
    with prof:
        for i in range(n):
            client.post(
                "/api/v1/triggers/",
                {"workflow": "bench-exec", "payload": PAYLOAD, "idempotency_key": f"pi-{tag}-{i}"},
                content_type="application/json",
                **auth,
            )
    (profiles / "post_inprocess.txt").write_text(prof.output_text(unicode=True, color=False))
    (profiles / "post_inprocess.html").write_text(prof.output_html())
    ids = list(
        TriggerInstance.objects.filter(idempotency_key__startswith=f"pi-{tag}-").values_list(
            "id", flat=True
        )
    )
    prof = Profiler(interval=0.0005)
    with prof:
        for _ in range(3):
            for instance_id in ids:
                engine.step_execute(instance_id=instance_id, worker="bench-inproc")
    (profiles / "step_inprocess.txt").write_text(prof.output_text(unicode=True, color=False))
    (profiles / "step_inprocess.html").write_text(prof.output_html())


def scenario_profile(ctx: Ctx) -> None:
    sz = ctx.sizes
    profiles = out_dir(ctx, "profiles")
    profiles.mkdir(parents=True, exist_ok=True)
    flush_broker()
    queries = _queries_per_step(ctx, profiles)
    _pyinstrument(ctx, profiles)
    close_out(ctx.workflows["bench-exec"])
    flush_broker()
    spy: dict[str, Any] = {}
    # py-spy on a real gunicorn (both workers) under the ingestion load.
    port = free_port()
    app = ctx.procs.gunicorn("gunicorn-profile", port, workers=2)
    try:
        result: dict[str, Any] = {}
        load = threading.Thread(
            target=lambda: result.update(
                loadgen(
                    port,
                    "/api/v1/triggers/",
                    ctx.token,
                    "bench-ingest",
                    "new",
                    sz.profile_s + 2,
                    0.5,
                    f"spy-{uuid.uuid4().hex[:6]}",
                )
            )
        )
        load.start()
        time.sleep(1.0)
        raw = profiles / "post_gunicorn.collapsed.txt"
        if py_spy(app.pid, sz.profile_s, raw, subprocesses=True):
            spy["post"] = summarize_collapsed(raw, profiles / "post_gunicorn.top.txt")
        load.join()
    finally:
        ctx.procs.stop(app)
    close_out(ctx.workflows["bench-ingest"])
    # py-spy on a celery worker node draining 3-node instances.
    flush_broker()
    wf = ctx.workflows["bench-exec"]
    since = timezone.now()
    preload(wf, sz.profile_exec_n, f"spy-{uuid.uuid4().hex[:6]}")
    workers = ctx.procs.celery_workers(2, tag="profile")
    try:
        time.sleep(0.5)
        raw = profiles / "worker.collapsed.txt"
        if py_spy(workers[0].pid, sz.profile_s, raw):
            spy["worker"] = summarize_collapsed(raw, profiles / "worker.top.txt")
        wait_terminal(wf, sz.profile_exec_n, sz.drain_timeout_s, since=since, procs=workers)
    finally:
        ctx.procs.stop_workers(workers)
    flush_broker()
    ctx.results["profile"] = {"queries": queries, "py_spy": spy}
    ctx.row(
        "5 profile",
        "queries per step (email / sms / email)",
        f"{queries.get('step_e1')} / {queries.get('step_s1')} / {queries.get('step_e2')}",
    )
    ctx.row(
        "5 profile",
        "queries per POST (new / repeated key)",
        f"{queries.get('post_new')} / {queries.get('post_repeat')}",
    )
