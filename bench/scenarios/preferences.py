"""Scenario 8 (issue 26): what the preference check costs a step. One email node sent
to the instance's recipient (no `to`: the address comes from the recipient row the
claim joins), run in-process through ``engine.step_execute`` (claim, render, the one
preference rule, unsubscribe token and headers, build the MIME message, record) on
PostgreSQL, for three groups in alternating rounds of the same run:

- recipients **with preferences set** (channels, categories, workflows entries that
  ``evaluate`` walks through before the channel rule lets the email go),
- recipients **without preferences** (``{}``: ``evaluate`` answers "default" at once),
- recipients who **opted out** (the skip path: nothing built or sent), for information.

Groups are interleaved in chunks of 25 steps, so drift (checkpoints, autovacuum, the
machine's neighbours) hits them alike. Each step is timed twice: this process's CPU
time (``time.process_time``: the Python work the check adds; PostgreSQL's waits are
not in it) and wall time (dominated by the two durable statements' commits, noisy at a
5 % resolution). Target: the CPU median with preferences <= 105 % of without; the wall
medians are reported next to it. Also reported: queries per step (the preference read
is part of the claim's statement, so it adds none).
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.scenarios.common import PAYLOAD, Ctx, S, ms
from bench.scenarios.in_process import due_instances, timed_steps
from executions.recording import postgres as pg_recording
from recipients.models import Recipient
from triggers import state
from triggers.models import TriggerInstance
from workflows.models import Workflow
from workflows.services import workflow_save

TARGET_RATIO = 1.05
WORKFLOW_KEY = "bench-prefs"
DEFINITION = {
    "entry_node_id": "hello",
    "nodes": [
        {
            "id": "hello",
            "type": "email",
            "config": {
                "subject": "Hello {{ recipient.properties.name | default: 'there' }}",
                "body": "Hi {{ payload.name }}. Unsubscribe: {{ unsubscribe_url }}",
            },
        }
    ],
    "edges": [],
}
# Set, and every entry consulted before the channel rule decides "send".
PREFERENCES = {
    "channels": {"email": True, "sms": False, "in_app": True},
    "categories": {
        "product": {"channels": {"sms": False}},
        "marketing": {"channels": {"in_app": False}},
        "digest": False,
    },
    "workflows": {"other-flow": False, "another": {"channels": {"email": False}}},
    "quiet_hours": None,
}
OPTED_OUT = {"categories": {"product": False}}
GROUPS = {"with": PREFERENCES, "without": {}, "opted_out": OPTED_OUT}


def _workflow(key: str = WORKFLOW_KEY) -> Workflow:
    wf = workflow_save(key=key, name=key, definition=DEFINITION, actor="bench")
    Workflow.objects.filter(pk=wf.pk).update(categories=["product", "marketing"])
    return wf


def _instances(wf: Workflow, group: str, n: int, tag: str) -> list[uuid.UUID]:
    people = [
        Recipient(
            id=f"{tag}-{group}-{i}",
            email=f"{tag}-{group}-{i}@example.com",
            properties={"name": f"Person {i}"},
            preferences=GROUPS[group],
        )
        for i in range(n)
    ]
    Recipient.objects.bulk_create(people, batch_size=1000)
    return due_instances(wf, people, key_prefix=f"{tag}-{group}", node_id="hello", payload=PAYLOAD)


def _claims(ids: list[uuid.UUID], how: str) -> list[float]:
    """Each claim's wall time: ``join`` = the product's statement (delivery, recipient
    and workflow joined); ``delivery`` = the delivery join alone (as before issue 26);
    ``extra`` = that plus one query for the recipient and one for the workflow."""
    delivery_only = state.Join(
        clause=pg_recording.CLAIM_JOIN.clause.split(' LEFT JOIN "recipients')[0],
        columns=pg_recording.CLAIM_JOIN.columns[:2],
    )
    times = []
    for instance_id in ids:
        t0 = time.perf_counter()
        join = pg_recording.CLAIM_JOIN if how == "join" else delivery_only
        row = state.claim(instance_id=instance_id, worker="bench", now=timezone.now(), join=join)
        if how == "extra" and row is not None:
            Recipient.objects.filter(pk=row.recipient_id).values_list(
                *pg_recording.RECIPIENT_FIELDS
            ).first()
            Workflow.objects.filter(pk=row.workflow_id).values_list(
                "critical", "categories"
            ).first()
        times.append(time.perf_counter() - t0)
    return times


def _claim_costs(wf: Workflow, rounds: int, n: int, tag: str) -> dict[str, float]:
    """Median claim time of each way of reading the recipient, alternating rounds."""
    times: dict[str, list[float]] = {"join": [], "delivery": [], "extra": []}
    for r in range(rounds):
        for how in times if r % 2 == 0 else reversed(list(times)):
            times[how] += _claims(_instances(wf, "with", n, f"{tag}-c{r}-{how}"), how)
    return {how: statistics.median(t) for how, t in times.items()}


def _queries_per_step(ids: list[uuid.UUID]) -> float:
    with CaptureQueriesContext(connection) as captured:
        timed_steps(ids)
    return len(captured.captured_queries) / len(ids)


def scenario_preferences(ctx: Ctx) -> None:
    quick = ctx.quick
    rounds, per_round = (2, 100) if quick else (6, 500)
    if not settings.NOTIFYFLOW_PUBLIC_URL:
        settings.NOTIFYFLOW_PUBLIC_URL = "http://127.0.0.1:8000"
    wf = _workflow()
    tag = uuid.uuid4().hex[:6]
    # Warm-up (caches, prepared statements), then the query counts, untimed.
    for group in GROUPS:
        timed_steps(_instances(wf, group, 20, f"{tag}-warm"))
    queries = {g: _queries_per_step(_instances(wf, g, 10, f"{tag}-q")) for g in GROUPS}
    wall: dict[str, list[float]] = {g: [] for g in GROUPS}
    cpu: dict[str, list[float]] = {g: [] for g in GROUPS}
    order = list(GROUPS)
    chunk = 25
    for r in range(rounds):
        ids = {g: _instances(wf, g, per_round, f"{tag}-r{r}") for g in GROUPS}
        for start in range(0, per_round, chunk):
            turn = start // chunk + r
            for group in order if turn % 2 == 0 else reversed(order):
                w, c = timed_steps(ids[group][start : start + chunk])
                wall[group] += w
                cpu[group] += c
    # On a workflow of their own: these claims are left processing.
    claims = _claim_costs(_workflow(f"{WORKFLOW_KEY}-claims"), rounds, per_round // 2, tag)
    unfinished = TriggerInstance.objects.filter(workflow=wf).exclude(status=S.COMPLETED).count()
    if unfinished:
        raise RuntimeError(f"preferences: {unfinished} instances did not complete")
    median = {g: statistics.median(t) for g, t in wall.items()}
    cpu_median = {g: statistics.median(t) for g, t in cpu.items()}
    cpu_mean = {g: statistics.fmean(t) for g, t in cpu.items()}
    ratio = cpu_median["with"] / cpu_median["without"]
    wall_ratio = median["with"] / median["without"]
    result: dict[str, Any] = {
        "rounds": rounds,
        "steps_per_group": rounds * per_round,
        "wall_median_s": median,
        "cpu_median_s": cpu_median,
        "cpu_mean_s": cpu_mean,
        "queries_per_step": queries,
        "cpu_ratio_with_to_without": ratio,
        "cpu_mean_ratio_with_to_without": cpu_mean["with"] / cpu_mean["without"],
        "wall_ratio_with_to_without": wall_ratio,
        "claim_median_s": claims,
    }
    ctx.results["preferences"] = result
    ctx.row(
        "8 preferences",
        "step CPU, recipient with preferences (median)",
        ms(cpu_median["with"]),
        f"without preferences {ms(cpu_median['without'])} (same run)",
        "<= 105 %",
        f"{ratio:.1%}",
    )
    ctx.row(
        "8 preferences",
        "step wall, with preferences (median)",
        ms(median["with"]),
        f"without preferences {ms(median['without'])}",
        "",
        f"{wall_ratio:.1%}",
    )
    ctx.row(
        "8 preferences",
        "step, opted out: skipped (CPU / wall median)",
        f"{ms(cpu_median['opted_out'])} / {ms(median['opted_out'])}",
        f"queries/step with {queries['with']:.1f}, without {queries['without']:.1f}, "
        f"opted out {queries['opted_out']:.1f}",
    )
    ctx.row(
        "8 preferences",
        "claim with recipient + workflow joined (median)",
        ms(claims["join"]),
        f"delivery join only {ms(claims['delivery'])}; + 2 queries instead {ms(claims['extra'])}",
    )
    ctx.target(
        "preference check: step with / without preferences",
        f"{ratio:.1%}",
        "<= 105 %",
        ok=ratio <= TARGET_RATIO,
        note=f"worker CPU per step, median of {rounds * per_round} steps each "
        f"(wall: {wall_ratio:.1%})",
    )
