"""GET /workflows/{key}/stats/ at 1M step logs: EXPLAIN ANALYZE of its two aggregate
queries, with the composite index (migration executions 0003) and without it.

    .venv/bin/python -m bench.stats_plan [--rows 1000000]

Uses its own throwaway database (``BENCH_STATS_DB``, default ``notifyflow_bench_stats``
on 127.0.0.1:5432), dropped and created at the start; rows are generated set-based with
``INSERT ... SELECT generate_series`` (about 30 s for 1M on 2 cores). Prints the plans and
timings; bench/RESULTS.md ("Workflow stats at 1M step logs") keeps a run's figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST, PORT = "127.0.0.1", 5432


def psql(sql: str, db: str = "postgres") -> None:
    subprocess.run(
        [
            "psql",
            "-h",
            HOST,
            "-p",
            str(PORT),
            "-U",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-qc",
            sql,
            db,
        ],
        check=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    db = os.environ.get("BENCH_STATS_DB", "notifyflow_bench_stats")
    psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    psql(f"CREATE DATABASE {db}")
    url = f"postgres://postgres@{HOST}:{PORT}/{db}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "notifyflow.settings"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.db import connection
    from django.db.models import Count

    from executions.models import StepExecutionLog
    from triggers.models import TriggerInstance
    from workflows.demo import DEMO_DEFINITION
    from workflows.services import workflow_save

    big = workflow_save(key="big", name="Big", definition=DEMO_DEFINITION)
    small = workflow_save(key="small", name="Small", definition=DEMO_DEFINITION)
    instances = args.rows // 5
    ti, sl = TriggerInstance._meta.db_table, StepExecutionLog._meta.db_table
    started = time.monotonic()
    with connection.cursor() as cursor:
        # 99% of the rows belong to "big" (the worst case for its stats), 1% to "small".
        cursor.execute(
            f"""
            INSERT INTO {ti} (id, workflow_id, workflow_version_id, idempotency_key, payload,
                status, current_node_id, vars, attempts, available_at, locked_by,
                last_error, created_at, updated_at)
            SELECT md5(g::text)::uuid, CASE WHEN g %% 100 = 0 THEN %s ELSE %s END,
                CASE WHEN g %% 100 = 0 THEN %s ELSE %s END, 'k' || g, '{{}}',
                (ARRAY['completed','completed','completed','failed','enqueued'])[1 + g %% 5],
                NULL, '{{}}', 0, now(), '', '', now(), now()
            FROM generate_series(1, %s) g""",
            [small.pk, big.pk, small.current_version_id, big.current_version_id, instances],
        )
        cursor.execute(
            f"""
            INSERT INTO {sl} (trigger_id, workflow_id, workflow_version, node_id, node_type,
                attempt, started_at, finished_at, input_context, output, success, error,
                error_kind, task_id, worker)
            SELECT md5(i::text)::uuid, CASE WHEN i %% 100 = 0 THEN %s ELSE %s END, 1,
                (ARRAY['welcome_email','wait','welcome_sms','welcome_sms','welcome_email'])[1 + s],
                'email', 1, now(), now(), '{{"payload": {{"name": "Ada"}}}}', '{{}}',
                (i + s) %% 17 <> 0, '', '', '', 'w1'
            FROM generate_series(1, %s) i, generate_series(0, 4) s""",
            [small.pk, big.pk, instances],
        )
        cursor.execute(f"VACUUM ANALYZE {ti}")
        cursor.execute(f"VACUUM ANALYZE {sl}")
        cursor.execute(f"SELECT count(*), pg_size_pretty(pg_total_relation_size('{sl}')) FROM {sl}")
        count, size = cursor.fetchone()
    print(f"generated {count} step logs ({size}) in {time.monotonic() - started:.1f}s")

    def plans(label: str) -> None:
        for workflow in (big, small):
            queries = {
                "instances per status": TriggerInstance.objects.filter(workflow=workflow)
                .order_by()
                .values_list("status")
                .annotate(n=Count("*")),
                "per node": StepExecutionLog.objects.filter(workflow=workflow)
                .order_by()
                .values_list("node_id", "success")
                .annotate(n=Count("*")),
            }
            for name, queryset in queries.items():
                queryset.explain(analyze=True)  # warm the cache: measure the steady state
                plan = queryset.explain(analyze=True, buffers=True)
                print(f"\n--- {label}: {workflow.key}: {name}\n{plan}")

    plans("with steplog_workflow_node_success")
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX steplog_workflow_node_success")
        cursor.execute(f"CREATE INDEX steplog_workflow_fk ON {sl} (workflow_id)")
        cursor.execute(f"ANALYZE {sl}")
    plans("before (the foreign key's index only)")
    with connection.cursor() as cursor:
        started = time.monotonic()
        cursor.execute(
            f"CREATE INDEX steplog_workflow_node_success ON {sl} (workflow_id, node_id, success)"
        )
        print(f"\nCREATE INDEX steplog_workflow_node_success: {time.monotonic() - started:.1f}s")
    connection.close()
    psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


if __name__ == "__main__":
    main()
