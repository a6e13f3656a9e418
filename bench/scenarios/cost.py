"""Scenario 4, cost at scale: each hot statement's plan and timing with a large
table, next to the same work written by hand."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.scenarios.common import PAYLOAD, Ctx, flush_broker, ms, out_dir, stats_s, verdict
from bench.scenarios.drain import close_out, due_rows, park
from executions import engine, sweeper
from triggers.models import TriggerInstance
from triggers.services import trigger_create
from workflows.models import Workflow

# --- 4. cost at scale ------------------------------------------------------------------


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _due_instances(wf: Workflow, n: int, prefix: str) -> list[uuid.UUID]:
    rows = due_rows(wf, prefix, range(n), timezone.now() - timedelta(seconds=1))
    TriggerInstance.objects.bulk_create(rows, batch_size=1000)
    return [r.id for r in rows]


def _explain(sql: str, name: str, label: str, *, rollback: bool, quick: bool) -> str:
    plans = out_dir(quick, "plans")
    plans.mkdir(parents=True, exist_ok=True)
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            text = "\n".join(r[0] for r in cur.fetchall())
        if rollback:
            transaction.set_rollback(True)
    (plans / f"{name}.{label}.txt").write_text(f"-- {label}\n{sql}\n\n{text}\n")
    return text


def _pick(captured: list[dict[str, str]], *needles: str) -> str:
    for q in captured:
        if all(n in q["sql"] for n in needles):
            return q["sql"]
    raise RuntimeError(f"no captured query with {needles}: {[q['sql'][:80] for q in captured]}")


def _cost_pass(ctx: Ctx, label: str) -> dict[str, Any]:
    sz = ctx.sizes
    wf = ctx.workflows["bench-exec"]
    tag = f"cost-{label}-{uuid.uuid4().hex[:6]}"
    # Claim: k due instances, one claim each (what a worker's first statement does).
    ids = iter(_due_instances(wf, sz.cost_k, f"{tag}-claim"))
    claim_t = _timed(lambda: engine.claim(instance_id=next(ids), worker="bench"), sz.cost_k)
    # The sweeper pass, nothing to do (the steady state).
    sweep_t = _timed(lambda: sweeper.sweep(), sz.cost_sweeps)
    # trigger_create: new keys, then the same keys again.
    counter = iter(range(10**9))
    new_t = _timed(
        lambda: trigger_create(
            workflow="bench-exec", idempotency_key=f"{tag}-new-{next(counter)}", payload=PAYLOAD
        ),
        sz.cost_k,
    )
    counter = iter(range(10**9))
    rep_t = _timed(
        lambda: trigger_create(
            workflow="bench-exec", idempotency_key=f"{tag}-new-{next(counter)}", payload=PAYLOAD
        ),
        sz.cost_k,
    )

    # Event delivery: one event (by an interest subject) to one parked instance, what
    # POST /api/v1/events/ does minus HTTP; at scale each subject also names 10 finished
    # instances (BIG_INTERESTS_SQL), as a user's subject does after a while.
    from triggers.events import event_receive

    wait_wf = ctx.workflows["bench-cost-wait"]
    parked = park(wait_wf, sz.cost_k, f"{tag}-park", None)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO triggers_interest (instance_id, subject) "
            "SELECT id, 'user:' || (row_number() OVER () - 1) FROM unnest(%s::uuid[]) AS id",
            [parked],
        )
        cur.execute("ANALYZE triggers_interest")
    subjects = iter(range(sz.cost_k))
    reached: list[int] = []

    def deliver_one() -> None:
        i = next(subjects)
        result = event_receive(
            name="go", event_id=f"{tag}-ev-{i}", context={"n": i}, subjects=[f"user:{i}"]
        )
        reached.append(len(result.delivered))

    deliver_t = _timed(deliver_one, sz.cost_k)
    if sum(reached) != sz.cost_k:
        raise RuntimeError(f"cost: event delivery reached {sum(reached)} of {sz.cost_k}")
    close_out(wait_wf)

    # EXPLAIN (ANALYZE, BUFFERS) of the statements themselves, captured from the calls.
    [due] = _due_instances(wf, 1, f"{tag}-plan")
    with transaction.atomic(), CaptureQueriesContext(connection) as cq:
        engine.claim(instance_id=due, worker="bench")
        transaction.set_rollback(True)
    _explain(
        _pick(cq.captured_queries, "UPDATE", "triggers_triggerinstance"),
        "claim_update",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    with CaptureQueriesContext(connection) as cq:
        sweeper.sweep()
    _explain(
        _pick(cq.captured_queries, "SELECT", "'processing'"),
        "sweep_expired_leases",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    _explain(
        _pick(cq.captured_queries, "SELECT", "'enqueued'"),
        "sweep_redispatch_due",
        label,
        rollback=True,
        quick=ctx.quick,
    )
    with CaptureQueriesContext(connection) as cq:
        trigger_create(workflow="bench-exec", idempotency_key=f"{tag}-new-0", payload=PAYLOAD)
    _explain(
        _pick(cq.captured_queries, "SELECT", "triggers_triggerinstance", "idempotency_key"),
        "idempotency_lookup",
        label,
        rollback=True,
        quick=ctx.quick,
    )

    close_out(wf)
    flush_broker()
    return {
        "claim": stats_s(claim_t),
        "sweep": stats_s(sweep_t),
        "trigger_create_new": stats_s(new_t),
        "trigger_create_repeat": stats_s(rep_t),
        "event_delivery": stats_s(deliver_t),
    }


BULK_SQL = """
INSERT INTO triggers_triggerinstance
  (id, workflow_id, workflow_version_id, idempotency_key, payload, status, current_node_id,
   vars, attempts, available_at, lease_token, locked_by, locked_until, dispatched_at,
   last_error, created_at, updated_at, finished_at, created_by_key)
SELECT gen_random_uuid(), %(wf)s, %(ver)s, 'bulk-' || g, %(payload)s::jsonb, 'completed', NULL,
       '{}'::jsonb, 0, t, NULL, '', NULL, t, '', t, t + interval '2 seconds',
       t + interval '2 seconds', 'bench'
FROM generate_series(1, %(n)s) AS g,
     LATERAL (SELECT now() - interval '30 days' + g * interval '2 seconds' AS t) AS ts
"""


# Per finished instance: two interests ("order:<n>", unique; "user:<n mod 100k>", shared
# by 10 instances), one consumed inbox row, and a step log per node (3).
BIG_INTERESTS_SQL = """
INSERT INTO triggers_interest (instance_id, subject)
SELECT id, s FROM (
  SELECT id, row_number() OVER () AS g FROM triggers_triggerinstance
  WHERE idempotency_key LIKE 'bulk-%%'
) AS t, LATERAL (VALUES ('order:' || g), ('user:' || (g % 100000))) AS v(s)
"""
BIG_INBOX_SQL = """
INSERT INTO triggers_inboxevent
  (instance_id, name, event_id, context, received_at, consumed_at, consumed_by_node)
SELECT id, 'go', 'old-' || idempotency_key, '{}'::jsonb, created_at, created_at, 'w'
FROM triggers_triggerinstance WHERE idempotency_key LIKE 'bulk-%%'
"""
BIG_STEPLOG_SQL = """
INSERT INTO executions_stepexecutionlog
  (workflow_version, node_id, node_type, attempt, started_at, finished_at, input_context,
   output, success, error, error_kind, task_id, worker, trigger_id, workflow_id)
SELECT 1, n.node, n.kind, 1, t.created_at, t.created_at + interval '10 ms',
       %(payload)s::jsonb, '{"recipient": "ada@example.com"}'::jsonb, true, '', '', '',
       'bench', t.id, %(wf)s
FROM triggers_triggerinstance t,
     (VALUES ('e1', 'email'), ('s1', 'sms'), ('e2', 'email')) AS n(node, kind)
WHERE t.idempotency_key LIKE 'bulk-%%'
"""


def scenario_cost(ctx: Ctx) -> None:
    sz = ctx.sizes
    wf = ctx.workflows["bench-exec"]
    flush_broker()
    with connection.cursor() as cur:
        # CASCADE: every table that refers to an instance (history, deliveries and their
        # attempts and events, inbox, interests, outbox), whatever is added later.
        cur.execute("TRUNCATE triggers_triggerinstance CASCADE")
        cur.execute("VACUUM ANALYZE triggers_triggerinstance")
        cur.execute("CHECKPOINT")
    small = _cost_pass(ctx, "0")
    t0 = time.monotonic()
    with connection.cursor() as cur:
        cur.execute(
            BULK_SQL,
            {
                "wf": wf.pk,
                "ver": wf.current_version_id,
                "payload": json.dumps(PAYLOAD),
                "n": sz.big_rows,
            },
        )
        # What those instances leave behind: interests, a consumed inbox row, step logs.
        cur.execute(BIG_INTERESTS_SQL)
        cur.execute(BIG_INBOX_SQL)
        cur.execute(BIG_STEPLOG_SQL, {"wf": wf.pk, "payload": json.dumps(PAYLOAD)})
        for table in (
            "triggers_triggerinstance",
            "triggers_interest",
            "triggers_inboxevent",
            "executions_stepexecutionlog",
        ):
            cur.execute(f"VACUUM ANALYZE {table}")
        # The load wrote gigabytes of WAL: without this the passes below would time the
        # checkpoint it set off (every first write to a page after a checkpoint logs the
        # whole page), not the steady state of a large database. Both passes start right
        # after a checkpoint.
        cur.execute("CHECKPOINT")
        cur.execute(
            "SELECT (SELECT count(*) FROM triggers_interest), "
            "(SELECT count(*) FROM triggers_inboxevent), "
            "(SELECT count(*) FROM executions_stepexecutionlog)"
        )
        loaded = dict(zip(("interests", "inbox_rows", "step_logs"), cur.fetchone(), strict=True))
    load_s = time.monotonic() - t0
    big_label = (
        f"{sz.big_rows // 1000}k" if sz.big_rows < 1_000_000 else f"{sz.big_rows // 1_000_000}M"
    )
    big = _cost_pass(ctx, big_label)
    ctx.results["cost"] = {
        "rows": sz.big_rows,
        "loaded": loaded,
        "bulk_load_s": load_s,
        "0": small,
        big_label: big,
    }
    names = {
        "claim": "claim (engine.claim)",
        "sweep": "sweeper pass (sweeper.sweep)",
        "trigger_create_new": "trigger_create, new key",
        "trigger_create_repeat": "trigger_create, repeated key",
        "event_delivery": "event delivery (event_receive, 1 subject -> 1 parked)",
    }
    target_names = {
        "claim": "claim p50",
        "sweep": "sweeper pass p50",
        "trigger_create_new": "POST (trigger_create) new key p50",
        "trigger_create_repeat": "POST (trigger_create) repeated key p50",
        "event_delivery": "event delivery p50",
    }
    for key, title in names.items():
        a, b = small[key]["p50"], big[key]["p50"]
        ratio = b / a if a else 0.0
        ctx.row(
            "4 cost",
            f"{title} p50, {big_label} finished rows",
            ms(b),
            f"{ms(a)} with 0 rows",
            "<= 1.2x",
            verdict(ratio <= 1.2, f"{ratio:.2f}x"),
        )
        ctx.target(
            f"cost at 1M rows: {target_names[key]}",
            f"{b * 1000:.2f} ms ({ratio:.2f}x)",
            f"<= 1.2x of {a * 1000:.2f} ms",
            "",
            ratio <= 1.2,
            f"{big_label} finished rows" + ("" if big_label == "1M" else " (quick size)"),
        )
