"""Times the trigger-instance changelist of the operator console on a big table.

    .venv/bin/python bench/admin_changelist.py [--rows 1000000] [--repeat 5] [--explain]

Uses its own PostgreSQL database (nf_admin_bench; BENCH_ADMIN_DATABASE_URL to change),
migrates it, bulk-loads ``--rows`` trigger instances with one INSERT ... SELECT
generate_series (skipped when the table already holds that many), ANALYZEs, then GETs
admin pages for a logged-in superuser with Django's test client and reports, per
page: median and worst wall time, number of queries, and the slowest query.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATABASE_URL = os.environ.get(
    "BENCH_ADMIN_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/nf_admin_bench"
)
os.environ["DATABASE_URL"] = DATABASE_URL
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifyflow.settings")

WORKFLOWS = 5
# Share of rows per status: a long-lived queue is mostly finished rows.
LOAD_SQL = """
INSERT INTO triggers_triggerinstance (
    id, workflow_id, workflow_version_id, idempotency_key, payload, status,
    current_node_id, vars, attempts, available_at, lease_token, locked_by, locked_until,
    dispatched_at, last_error, created_at, updated_at, finished_at, created_by_key)
SELECT
    gen_random_uuid(), w.id, w.current_version_id, 'bench-' || g,
    jsonb_build_object('name', 'User ' || g, 'email', 'user' || g || '@example.com',
                       'phone', '+1500555' || lpad((g % 10000)::text, 4, '0'),
                       'plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END,
                       'note', repeat('x', 120)),
    s.status,
    CASE WHEN s.status IN ('completed') THEN NULL ELSE 'text' END,
    CASE WHEN s.status = 'completed' THEN jsonb_build_object(
        'email_hello', jsonb_build_object('message_id', '<' || g || '@notifyflow>',
                                          'to', 'user' || g || '@example.com',
                                          'sent_at', '2026-01-01T00:00:00+00:00'),
        'sms_text', jsonb_build_object('message_id', 'SM' || md5(g::text),
                                       'to', '+15005550006',
                                       'sent_at', '2026-01-01T00:00:00+00:00'))
    ELSE '{}'::jsonb END,
    CASE WHEN s.status = 'failed' THEN 3 ELSE 0 END,
    now() - make_interval(secs => g) + CASE WHEN s.status = 'enqueued' AND g % 2 = 0
                                            THEN interval '1 hour' ELSE interval '0' END,
    CASE WHEN s.status = 'processing' THEN gen_random_uuid() END,
    CASE WHEN s.status = 'processing' THEN 'bench@host' ELSE '' END,
    CASE WHEN s.status = 'processing' THEN now() + interval '90 seconds' END,
    now() - make_interval(secs => g),
    CASE WHEN s.status = 'failed' THEN 'node text: Twilio 400 (code 21211)' ELSE '' END,
    now() - make_interval(secs => g),
    now() - make_interval(secs => g),
    CASE WHEN s.status IN ('completed', 'failed') THEN now() - make_interval(secs => g) END,
    'bench'
FROM generate_series(1, %(rows)s) AS g
JOIN LATERAL (SELECT CASE
        WHEN g % 100 < 90 THEN 'completed'
        WHEN g % 100 < 95 THEN 'failed'
        WHEN g % 100 < 99 THEN 'enqueued'
        ELSE 'processing' END AS status) s ON true
JOIN LATERAL (SELECT id, current_version_id FROM workflows_workflow
              WHERE key = 'bench-' || (g %% %(workflows)s)) w ON true
"""


def ensure_database() -> None:
    import psycopg

    name = DATABASE_URL.rsplit("/", 1)[1]
    server = DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(server, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def load(rows: int) -> None:
    from django.db import connection

    from triggers.models import TriggerInstance
    from workflows.services import workflow_save

    sys.path.insert(0, str(ROOT / "tests"))
    from factories import email_sms_definition

    existing = TriggerInstance.objects.count()
    if existing == rows:
        print(f"table already holds {rows:,} rows; not reloading")
        return
    for i in range(WORKFLOWS):
        workflow_save(key=f"bench-{i}", name=f"Bench {i}", definition=email_sms_definition())
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE triggers_triggerinstance CASCADE")
        cursor.execute(
            LOAD_SQL.replace("%(rows)s", str(int(rows)))
            .replace("%(workflows)s", str(WORKFLOWS))
            .replace("%%", "%")
        )
        cursor.execute("ANALYZE triggers_triggerinstance")
    print(f"loaded {rows:,} instances in {time.monotonic() - started:.1f}s")


def measure(client, url: str, params: dict, repeat: int) -> dict:
    """Timed GETs without test instrumentation (it copies every template context, which
    would dominate the figures); then one more GET with the queries captured."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url, params)  # warm: caches, connection, plans
    assert response.status_code == 200, (url, params, response.status_code)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url, params)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        client.get(url, params)
    slowest = max(queries.captured_queries, key=lambda q: float(q["time"]))
    body = response.content.decode()
    shown = body.count('name="_selected_action"')
    found = re.search(r'class="paginator">(.*?)</p>', body, re.S)
    text = re.sub(r"<[^>]+>|\s+", " ", found.group(1)) if found else ""
    said = re.search(r"((?:about|more than)\s+)?[\d,]+\s+trigger instances?", text)
    return {
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "queries": len(queries),
        "slowest_ms": float(slowest["time"]) * 1000,
        "db_ms": sum(float(q["time"]) for q in queries.captured_queries) * 1000,
        "slowest_sql": slowest["sql"],
        "rows": shown if found else None,
        "count": re.sub(r"\s+", " ", said.group(0)) if said else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--explain", action="store_true", help="print EXPLAIN ANALYZE of each page's slowest query"
    )
    args = parser.parse_args()

    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from triggers.models import TriggerInstance
    from workflows.models import Workflow

    call_command("migrate", verbosity=0)
    load(args.rows)
    user = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", password="bench-admin-password"
    )
    # The production guard allows only DJANGO_ALLOWED_HOSTS (not the test client's
    # "testserver"): a refused host would answer 400 without touching the database.
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    workflow = Workflow.objects.get(key="bench-1")
    some = TriggerInstance.objects.filter(workflow=workflow).only("id", "idempotency_key")[0]
    changelist = reverse("admin:triggers_triggerinstance_changelist")
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()
    pages = [
        ("unfiltered", changelist, {}),
        ("page 100 (OFFSET 4950)", changelist, {"p": "100"}),
        ("status=processing", changelist, {"status__exact": "processing"}),
        ("status=failed", changelist, {"status__exact": "failed"}),
        ("status=completed", changelist, {"status__exact": "completed"}),
        ("workflow=bench-1", changelist, {"workflow__id__exact": str(workflow.pk)}),
        (
            "workflow+status=failed",
            changelist,
            {"workflow__id__exact": str(workflow.pk), "status__exact": "failed"},
        ),
        ("created: past 7 days", changelist, {"created_at__gte": week_ago}),
        ("search: idempotency key", changelist, {"q": some.idempotency_key}),
        ("search: instance id", changelist, {"q": str(some.pk)}),
        (
            "instance detail page",
            reverse("admin:triggers_triggerinstance_change", args=[some.pk]),
            {},
        ),
        ("admin index (overview)", reverse("admin:index"), {}),
    ]
    estimate = TriggerInstance.objects.count()
    print(
        f"\ntrigger instances: {estimate:,} rows on {connection.display_name} "
        f"({connection.settings_dict['NAME']}); {args.repeat} timed GETs per page\n"
    )
    print(
        f"{'page':26} {'median ms':>9} {'max ms':>7} {'queries':>7} {'db ms':>6} "
        f"{'slowest q':>9} {'rows':>5}  count shown"
    )
    for label, url, params in pages:
        result = measure(client, url, params, args.repeat)
        rows = "" if result["rows"] is None else str(result["rows"])
        print(
            f"{label:26} {result['median_ms']:9.1f} {result['max_ms']:7.1f} "
            f"{result['queries']:7d} {result['db_ms']:6.1f} {result['slowest_ms']:9.1f} "
            f"{rows:>5}  {result['count'] or ''}"
        )
        if args.explain:
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + result["slowest_sql"])
                plan = "\n".join("      " + row[0] for row in cursor.fetchall())
            print(f"    slowest: {result['slowest_sql'][:300]}\n{plan}\n")


if __name__ == "__main__":
    main()
