"""The Celery references, with the project's task settings (acks_late, prefetch 1, same
broker), timed from inside so the drain rate is exact:

- ``bench.noop``: a task that does nothing (the broker + consumer loop floor);
- ``bench.relay``: consume, publish the successor, ack (a step must publish the next one);
- ``bench.durable_step``: the relay plus a claim UPDATE and an advance UPDATE on a table
  shaped like the instances table (two autocommit statements, synchronous commit): the
  least a durable step can write.

Each reference runs on its own pair of worker nodes, so one counter per process serves
them all; the worker_shutdown hook writes it to the marker directory.
"""

from __future__ import annotations

import json
import time

from celery import shared_task
from django.db import connection

# count, wall-clock first start / last finish, and this process's CPU time at both (the
# worker CPU per task without the worker's start-up).
_stats = {"count": 0, "first": 0.0, "last": 0.0, "cpu_first": 0.0, "cpu_last": 0.0}

# email -> sms -> email, as scenario 2's workflow.
NEXT_NODE = {"e1": "s1", "s1": "e2", "e2": None}


def _record(started: float, cpu_started: float) -> None:
    if not _stats["count"]:
        _stats["first"] = started
        _stats["cpu_first"] = cpu_started
    _stats["count"] += 1
    _stats["last"] = time.time()
    _stats["cpu_last"] = time.process_time()


@shared_task(name="bench.noop", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def noop() -> None:
    _record(time.time(), time.process_time())


@shared_task(name="bench.relay", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def relay(chain_id: str, remaining: int) -> None:
    started, cpu = time.time(), time.process_time()
    if remaining > 1:
        relay.apply_async(args=(chain_id, remaining - 1))
    _record(started, cpu)


CLAIM_SQL = """
UPDATE bench_reference_refstep
   SET status = 'processing', lease_token = gen_random_uuid(), locked_by = %s,
       locked_until = now() + interval '5 minutes', attempts = attempts + 1,
       updated_at = now()
 WHERE id = %s AND status = 'enqueued' AND available_at <= now()
RETURNING current_node_id, lease_token
"""
ADVANCE_SQL = """
UPDATE bench_reference_refstep
   SET status = CASE WHEN %(next)s::text IS NULL THEN 'completed' ELSE 'enqueued' END,
       current_node_id = %(next)s, lease_token = NULL, locked_by = '', locked_until = NULL,
       available_at = now(), updated_at = now(),
       finished_at = CASE WHEN %(next)s::text IS NULL THEN now() END
 WHERE id = %(id)s AND lease_token = %(lease)s
"""


@shared_task(
    name="bench.durable_step",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def durable_step(self, step_id: str) -> None:
    started, cpu = time.time(), time.process_time()
    with connection.cursor() as cur:  # autocommit: each statement is its own transaction
        cur.execute(CLAIM_SQL, [self.request.hostname or "", step_id])
        row = cur.fetchone()
        if row is None:
            return
        node, lease = row
        nxt = NEXT_NODE[node]
        cur.execute(ADVANCE_SQL, {"next": nxt, "id": step_id, "lease": lease})
    if nxt is not None:
        durable_step.apply_async(args=(step_id,))
    _record(started, cpu)


def noop_stats_json() -> str:
    return json.dumps(_stats)
