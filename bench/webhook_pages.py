"""What the deliverer writes to PostgreSQL per delivered message, by the message table's
fillfactor (issue 44, item 2): the share of its updates that were HOT (no index
entries), the WAL written per message, and the table's size once every message is
delivered.

``python -m bench.webhook_pages [--messages 2000] [--fillfactors 100 50]``

On the bench's database (as ``bench.run`` leaves it: run that first), for each
fillfactor in turn: empty the outbox's tables, set the fillfactor, write ``--messages``
messages the way a step's statement writes them (one instance each, one insert per
statement), then deliver them all through the deliverer: claims of
NOTIFYFLOW_STATUS_WEBHOOK_BATCH (``messages_claim``) and the record of a 204 for
each (``outcomes_record``), as a pass of ``deliver_due`` does, without the POSTs.
WAL and HOT counts are the server's own (``pg_current_wal_lsn``,
``pg_stat_user_tables``): they do not depend on what else the machine is doing. The
fillfactor the migrations set is put back at the end.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

TABLE = "status_webhooks_webhookmessage"


def _one(sql: str, params: list[Any] | None = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone() if cursor.description else None


def _updates() -> tuple[int, int]:
    """The table's updates and HOT updates so far, as the statistics have them."""
    from django.db import connection

    _one("SELECT pg_stat_force_next_flush()")
    connection.close()  # a new backend reads the flushed counts
    return _one(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s", [TABLE]
    )


def _write(messages: int) -> None:
    from status_webhooks.models import WebhookEndpoint
    from status_webhooks.outbox import NewEvent, record

    _one(
        "TRUNCATE status_webhooks_webhookattempt, status_webhooks_webhookmessage,"
        " status_webhooks_instancesequence, status_webhooks_webhookendpoint CASCADE"
    )
    WebhookEndpoint.objects.create(
        url="http://127.0.0.1:9/hooks", event_types=["instance.completed"], secret="whsec_YmVuY2g="
    )
    for _ in range(messages):
        instance = uuid.uuid4()
        data = {"status": "completed", "workflow_key": "bench-webhooks"}
        record(
            events=[NewEvent("instance.completed", data, instance, "bench-webhooks")],
        )


def _deliver_all() -> int:
    """Claim and record, as a pass of ``deliver_due`` does but with a 204 for every
    message instead of its POST, until nothing is due; how many were delivered."""
    from django.conf import settings
    from django.utils import timezone

    from status_webhooks.delivery import Outcome, messages_claim, outcomes_record

    delivered = 0
    while True:
        claimed = messages_claim(now=timezone.now(), limit=settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH)
        if not claimed:
            return delivered
        answered = Outcome(attempted_at=timezone.now(), status_code=204, duration_ms=1)
        outcomes_record(results=[(message, answered) for message in claimed])
        delivered += len(claimed)


def measure(*, fillfactor: int, messages: int) -> str:
    _one(f"ALTER TABLE {TABLE} SET (fillfactor = {int(fillfactor)})")
    _write(messages)
    updates, hot = _updates()
    (wal_before,) = _one("SELECT pg_current_wal_lsn()")
    started = time.perf_counter()
    delivered = _deliver_all()
    elapsed = time.perf_counter() - started
    (wal,) = _one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [wal_before])
    updates_after, hot_after = _updates()
    (pages,) = _one("SELECT pg_relation_size(%s) / current_setting('block_size')::int", [TABLE])
    updated, hot_updated = updates_after - updates, hot_after - hot
    return (
        f"fillfactor {fillfactor}: {delivered} delivered, {updated} updates of which"
        f" {hot_updated} HOT ({hot_updated / max(updated, 1):.0%}),"
        f" WAL {float(wal) / max(delivered, 1):,.0f} B per message, table {pages} pages"
        f" ({elapsed / max(delivered, 1) * 1e6:.0f} us per message claimed and recorded)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per fillfactor")
    parser.add_argument(
        "--fillfactors", type=int, nargs="+", default=[100, 50], help="the fillfactors to compare"
    )
    args = parser.parse_args()

    from bench.infra import bench_env

    os.environ.update(bench_env())
    import django

    django.setup()
    (options,) = _one("SELECT reloptions FROM pg_class WHERE relname = %s", [TABLE])
    try:
        for fillfactor in args.fillfactors:
            print(measure(fillfactor=fillfactor, messages=args.messages), flush=True)
    finally:
        kept = dict(option.split("=", 1) for option in options or ())
        restore = kept.get("fillfactor")
        _one(
            f"ALTER TABLE {TABLE} SET (fillfactor = {int(restore)})"
            if restore
            else f"ALTER TABLE {TABLE} RESET (fillfactor)"
        )


if __name__ == "__main__":
    main()
