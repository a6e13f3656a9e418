"""What a step's outcome statement costs the worker to send its parameters, as they are
sent now (one bind parameter per value) and as one JSON parameter (issue 44, item 1).

``python -m bench.outcome_params [--n 5000]``

Runs one email step of a fresh instance (the bench's database, as ``bench.run`` leaves
it: run that first), keeps the outcome statement it executed (the one with the most
parameters), then times, side by side in this process, psycopg adapting that
statement's parameters (``Cursor._convert_query``: what every execution of a prepared
statement pays) and ``json.dumps`` of the same values followed by psycopg adapting the
one string. The JSON figure leaves out what PostgreSQL would then spend parsing and
casting every value back, so it is the lower bound of that design's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import timeit
import uuid
from typing import Any


def _captured_outcome() -> tuple[str, list[Any]]:
    from django.utils import timezone

    from bench.scenarios.common import WORKFLOWS
    from bench.scenarios.drain import due_rows
    from executions import engine
    from notifyflow import db
    from triggers.models import TriggerInstance
    from workflows.models import Workflow
    from workflows.services import workflow_save

    key = "bench-outcome-params"
    workflow = Workflow.objects.filter(key=key).first() or workflow_save(
        key=key, name=key, definition=WORKFLOWS["bench-delay"], actor="bench"
    )
    (row,) = due_rows(workflow, f"params-{uuid.uuid4().hex[:6]}", range(1), timezone.now())
    row.current_node_id = "e1"  # the email node: a send, its attempt, the completion
    TriggerInstance.objects.bulk_create([row])
    captured: list[tuple[str, list[Any]]] = []
    original = db.execute

    def spy(cursor: Any, sql: str, params: Any) -> Any:
        captured.append((sql, list(params)))
        return original(cursor, sql, params)

    db.execute = spy  # type: ignore[assignment]
    try:
        engine.step_execute(instance_id=row.id, worker="bench")
    finally:
        db.execute = original  # type: ignore[assignment]
    return max(captured, key=lambda c: len(c[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="timed conversions of each kind")
    args = parser.parse_args()

    from bench.infra import bench_env

    os.environ.update(bench_env())
    import django

    django.setup()
    import psycopg
    from django.db import connection

    sql, params = _captured_outcome()
    connection.ensure_connection()
    cursor = psycopg.Cursor(connection.connection)
    cursor.execute("SELECT 1")  # the cursor's adapters are set up on first use
    values = [getattr(p, "obj", p) for p in params]  # Jsonb wrappers: their value

    def as_parameters() -> None:
        cursor._convert_query(sql, params)

    def encode(value: Any) -> str:
        return value.isoformat() if hasattr(value, "isoformat") else str(value)

    def as_one_json() -> None:
        text = json.dumps(values, default=encode)
        cursor._convert_query("SELECT %s::jsonb", [text])

    for name, call in (("one per value", as_parameters), ("one JSON parameter", as_one_json)):
        best = min(timeit.repeat(call, number=args.n, repeat=5)) / args.n
        print(f"{len(params)} outcome values, {name}: {best * 1e6:.1f} us of worker CPU per step")


if __name__ == "__main__":
    main()
