"""Scenario 11 (issue 28): ``GET /api/v1/feed/counts/``, the call every open page of the
customer's front end polls, with a million feed items in the table (quick: 20,000).

Served by one gunicorn (``-k sync -w 4``: sync workers wait on each read), next to a bare
DRF view returning a constant (``/bench/ref/constant/``: no authentication, no query)
on the same server, in alternating rounds of the same run. Measured: the counts with
a fresh poll (200, body) and with a current ``If-None-Match`` (304, no body); each is a
token check (no query: an HMAC, then kept per process) and one primary-key read of
the recipient's counter row, whatever the size of the feed. Target: counts >= 2,000 req/s.

The items are written by SQL (``generate_series``: 10,000 recipients with 100 items
each, a third seen, half read), and the counter rows computed from them once - as the
services would have left them.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from bench.infra import free_port
from bench.scenarios.common import Ctx, combine, loadgen, verdict
from feed.models import FeedCounter, FeedItem
from feed.services import feed_counts
from feed.tokens import feed_token_create
from recipients.models import Recipient
from workflows.services import workflow_save

TARGET_RPS = 2000.0
# Sync workers wait on PostgreSQL for each read: more of them than cores keeps the
# cores busy (the reference is served by the same processes).
WORKERS = 4
PREFIX = "bench-feed-"
DEFINITION = {
    "entry_node_id": "bell",
    "nodes": [{"id": "bell", "type": "in_app", "config": {"title": "t", "body": "b"}}],
    "edges": [],
}


def _fill(items: int, recipients: int) -> None:
    """``items`` feed items spread over ``recipients`` people, and their counters."""
    workflow = workflow_save(key="bench-feed", name="bench-feed", definition=DEFINITION)
    item, counter = FeedItem._meta.db_table, FeedCounter._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Recipient._meta.db_table} "
            "(id, properties, preferences, created_at, updated_at, feed_token_generation) "
            "SELECT %s || g, '{}', '{}', now(), now(), floor(random() * 1e15)::bigint + 1 "
            "FROM generate_series(0, %s - 1) g",
            [PREFIX, recipients],
        )
        cursor.execute(
            f"INSERT INTO {item} (id, recipient_id, workflow_id, instance_id, node_id, title, "
            "body, url, category, data, created_at, seen_at, read_at, archived_at) "
            "SELECT gen_random_uuid(), %s || (g %% %s), %s, NULL, 'bell', 'Item ' || g, "
            "'Someone commented', '', 'comments', '{}'::jsonb, "
            "now() - make_interval(secs => g), "
            "CASE WHEN g %% 3 = 0 THEN now() END, CASE WHEN g %% 2 = 0 THEN now() END, NULL "
            "FROM generate_series(1, %s) g",
            [PREFIX, recipients, workflow.pk, items],
        )
        cursor.execute(
            f"INSERT INTO {counter} (recipient_id, unread_count, unseen_count, version) "
            "SELECT recipient_id, "
            "count(*) FILTER (WHERE read_at IS NULL AND archived_at IS NULL), "
            "count(*) FILTER (WHERE seen_at IS NULL AND archived_at IS NULL), 1 "
            f"FROM {item} GROUP BY recipient_id"
        )
        # The steady state of a table that has been there a while: vacuumed (else the
        # autovacuum of a million fresh rows runs during the measurement, on the same
        # cores) and checkpointed.
        cursor.execute(f"VACUUM ANALYZE {item}")
        cursor.execute(f"VACUUM ANALYZE {counter}")
        cursor.execute("CHECKPOINT")


def scenario_feed(ctx: Ctx) -> None:
    quick = ctx.quick
    items, recipients = (20_000, 200) if quick else (1_000_000, 10_000)
    rounds, seconds, warmup = (1, 2.0, 0.5) if quick else (3, 6.0, 1.0)
    _fill(items, recipients)
    person = f"{PREFIX}7"
    token = feed_token_create(recipient_id=person, now=timezone.now()).token
    etag = feed_counts(recipient_id=person).etag
    port = free_port()
    server = ctx.procs.gunicorn("gunicorn-feed", port, workers=WORKERS)
    concurrency = 8
    out: dict[str, Any] = {
        "server": f"gunicorn -k sync -w {WORKERS}",
        "client_concurrency": concurrency,
        "feed_items": FeedItem.objects.count(),
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    cases = (
        ("reference", "/bench/ref/constant/", ()),
        ("counts_200", "/api/v1/feed/counts/", ()),
        ("counts_304", "/api/v1/feed/counts/", ("--if-none-match", etag)),
    )
    try:
        # Rounds alternate the three, so a noisy neighbour hits them alike.
        for rnd in range(rounds):
            for name, path, extra in cases:
                res = loadgen(
                    port,
                    path,
                    token,
                    "-",
                    "get",
                    seconds,
                    warmup,
                    f"feed-{name}-{rnd}",
                    concurrency=concurrency,
                    extra=extra,
                )
                if res["ok"] == 0:
                    raise RuntimeError(f"feed {name}: nothing succeeded: {res}")
                runs.setdefault(name, []).append(res)
    finally:
        ctx.procs.stop(server)
    for name, measured in runs.items():
        out[name] = combine(measured)
    ctx.results["feed"] = out
    ref = out["reference"]
    for name, label in (("counts_200", "200, body"), ("counts_304", "304, If-None-Match")):
        got = out[name]
        ratio = got["rps"] / ref["rps"] if ref["rps"] else 0.0
        ctx.row(
            "11 feed",
            f"GET feed/counts/ req/s ({label}), {out['feed_items']:,} items",
            f"{got['rps']:.0f} (p50 {got['p50_ms']:.1f} ms, p99 {got['p99_ms']:.1f} ms)",
            f"{ref['rps']:.0f} (bare DRF constant; {ratio:.0%})",
            f">= {TARGET_RPS:,.0f}",
            verdict(got["rps"] >= TARGET_RPS),
        )
    counts = out["counts_200"]
    ctx.target(
        "feed: GET counts/ req/s with 1M items",
        counts["rps"],
        TARGET_RPS,
        "req/s",
        counts["rps"] >= TARGET_RPS,
        f"{counts['rps'] / ref['rps']:.0%} of a bare DRF constant ({ref['rps']:.0f} req/s), "
        f"{out['feed_items']:,} items",
    )
