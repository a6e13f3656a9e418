"""Throttle counters: within a sliding window at most ``limit`` passes of a
key, under any number of workers racing on it.

A counter (``ThrottleCounter``) holds the key's hits in the window as epoch
milliseconds. On PostgreSQL a pass is ONE statement (``PostgresThrottleStore``)::

    INSERT … VALUES (…, [now]) ON CONFLICT (scope, subject, key) DO UPDATE
        SET hits = <hits still in the window> || now
        WHERE <count of hits in the window> < limit
    RETURNING <count in the window>

The conflicting row is locked and its WHERE re-evaluated against the latest committed
version, so racing workers queue on the row and never let more than ``limit`` through in
a window; no transaction is held around it. When it returns nothing the key is full, and
a second read finds when the oldest hit leaves the window (``retry_at``). SQLite (tests,
development) does the same in one ORM transaction (``OrmThrottleStore``): its writes are
serialized anyway. ``THROTTLE_STORE`` is the one for this database, chosen once.

A hit is recorded before the step that passed is recorded: a worker killed in between
runs the step again and passes (or not) a second time. Counting it twice only
over-throttles (one pass less in that window), never lets a burst through: acceptable.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.models import Field, QuerySet
from django.utils import timezone

from notifyflow import db

from .models import ThrottleCounter, ThrottleScope

MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class ThrottleDecision:
    """Whether the pass went through; the key's hits in the window (with this one when
    it passed); when it has room again (None when it passed)."""

    passed: bool
    count: int
    retry_at: datetime | None = None


@dataclass(frozen=True)
class ThrottleState:
    """A counter as the list shows it at ``now``."""

    count: int
    oldest_hit: datetime | None
    # When the window has room again: now if it has, else the oldest hit + the window.
    next_room_at: datetime


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_epoch_ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def workflow_subject(*, workflow: str, node: str) -> str:
    """A workflow-scope counter's subject: one node of one workflow."""
    return f"{workflow}:{node}"


def throttle_pass(
    *,
    scope: str,
    subject: str,
    key: str,
    limit: int,
    window: timedelta,
    now: datetime,
    force: bool = False,
) -> ThrottleDecision:
    """Count one pass of ``key`` at ``now`` if fewer than ``limit`` hits of it are in
    the window ``(now - window, now]``. ``force``: an operator released the instance
    (run-now): it passes whatever the count, and its hit is recorded."""
    window_ms = max(1, int(window.total_seconds() * 1000))
    at = epoch_ms(now)
    count = THROTTLE_STORE.record_pass(scope, subject, key, limit, window_ms, at, force, now)
    if count is not None:
        return ThrottleDecision(passed=True, count=count)
    hits = (
        ThrottleCounter.objects.filter(scope=scope, subject=subject, key=key)
        .values_list("hits", flat=True)
        .first()
    )
    in_window = sorted(h for h in hits or [] if h > at - window_ms)
    if len(in_window) < limit:  # reset or slid out meanwhile: room now
        return ThrottleDecision(passed=False, count=len(in_window), retry_at=now)
    # The (count - limit + 1)-th oldest hit must leave before there is room.
    leaving = in_window[len(in_window) - limit]
    return ThrottleDecision(
        passed=False, count=len(in_window), retry_at=from_epoch_ms(leaving + window_ms)
    )


# --- the stores ----------------------------------------------------------------------


class ThrottleStore(Protocol):
    def record_pass(
        self,
        scope: str,
        subject: str,
        key: str,
        limit: int,
        window_ms: int,
        at: int,
        force: bool,
        now: datetime,
    ) -> int | None:
        """Record the hit ``at`` (epoch ms) unless ``limit`` hits are in the window (or
        ``force``): the count in the window after the pass, or None when the key is
        full (nothing written)."""
        ...


@functools.cache
def pass_sql() -> str:
    """``PostgresThrottleStore``'s one statement (the module's docstring shows it)."""
    meta = ThrottleCounter._meta
    q = connection.ops.quote_name

    def col(name: str) -> str:
        field = meta.get_field(name)
        assert isinstance(field, Field) and field.column
        return q(field.column)

    table, hits = q(meta.db_table), col("hits")
    # Hits of the existing row still in the window of ``%(keep)s`` ms (the longest of
    # this node's window and the last writer's: nodes sharing a recipient-scope key may
    # differ), and the count of those in this node's window.
    kept = (
        f"SELECT COALESCE(jsonb_agg(h::bigint ORDER BY h::bigint), '[]'::jsonb) "
        f"FROM jsonb_array_elements_text({table}.{hits}) AS e(h) "
        f"WHERE h::bigint > %(at)s - GREATEST({table}.{col('window_ms')}, %(window)s)"
    )
    counted = (
        f"SELECT count(*) FROM jsonb_array_elements_text({table}.{hits}) AS e(h) "
        f"WHERE h::bigint > %(at)s - %(window)s"
    )
    returned = (
        f"SELECT count(*) FROM jsonb_array_elements_text({hits}) AS e(h) "
        f"WHERE h::bigint > %(at)s - %(window)s"
    )
    columns = ", ".join(
        col(name)
        for name in ("scope", "subject", "key", "hits", "limit", "window_ms", "updated_at")
    )
    return (
        f"INSERT INTO {table} ({columns}) "
        f"VALUES (%(scope)s, %(subject)s, %(key)s, jsonb_build_array(%(at)s::bigint), "
        f"%(limit)s, %(window)s, %(now)s) "
        f"ON CONFLICT ({col('scope')}, {col('subject')}, {col('key')}) DO UPDATE SET "
        f"{hits} = ({kept}) || jsonb_build_array(%(at)s::bigint), "
        f"{col('limit')} = EXCLUDED.{col('limit')}, "
        f"{col('window_ms')} = EXCLUDED.{col('window_ms')}, "
        f"{col('updated_at')} = EXCLUDED.{col('updated_at')} "
        f"WHERE %(force)s OR ({counted}) < %(limit)s "
        f"RETURNING ({returned})"
    )


class PostgresThrottleStore(ThrottleStore):
    def record_pass(
        self,
        scope: str,
        subject: str,
        key: str,
        limit: int,
        window_ms: int,
        at: int,
        force: bool,
        now: datetime,
    ) -> int | None:
        params: dict[str, Any] = {
            "scope": scope,
            "subject": subject,
            "key": key,
            "limit": limit,
            "window": window_ms,
            "at": at,
            "now": now,
            "force": force,
        }
        # Prepared (``notifyflow.db.execute``): planning the statement on every pass was
        # a visible share of a throttle step (bench/scenarios/gates.py); its one plan is
        # the unique (scope, subject, key) probe whatever the values.
        with connection.cursor() as cursor:
            row = db.execute(cursor, pass_sql(), params).fetchone()  # type: ignore[arg-type]
        return None if row is None else int(row[0])


class OrmThrottleStore(ThrottleStore):
    """The same pass in one ORM transaction (SQLite)."""

    def record_pass(
        self,
        scope: str,
        subject: str,
        key: str,
        limit: int,
        window_ms: int,
        at: int,
        force: bool,
        now: datetime,
    ) -> int | None:
        with transaction.atomic():
            counter = (
                ThrottleCounter.objects.select_for_update()
                .filter(scope=scope, subject=subject, key=key)
                .first()
            )
            if counter is None:
                ThrottleCounter.objects.create(
                    scope=scope,
                    subject=subject,
                    key=key,
                    hits=[at],
                    limit=limit,
                    window_ms=window_ms,
                    updated_at=now,
                )
                return 1
            keep = max(counter.window_ms, window_ms)
            kept = sorted(h for h in counter.hits if h > at - keep)
            count = sum(1 for h in kept if h > at - window_ms)
            if not force and count >= limit:
                return None
            counter.hits = [*kept, at]
            counter.limit, counter.window_ms, counter.updated_at = limit, window_ms, now
            counter.save(update_fields=["hits", "limit", "window_ms", "updated_at"])
            return count + 1


THROTTLE_STORE: ThrottleStore = db.per_database(
    postgres=PostgresThrottleStore, other=OrmThrottleStore
)


def _matching(
    *,
    scope: str | None,
    key: str | None,
    workflow: str | None,
    node: str | None,
    recipient: str | None,
) -> QuerySet[ThrottleCounter]:
    counters = ThrottleCounter.objects.all()
    if scope is not None:
        counters = counters.filter(scope=scope)
    if key is not None:
        counters = counters.filter(key=key)
    if workflow is not None and node is not None:
        counters = counters.filter(
            scope=ThrottleScope.WORKFLOW, subject=workflow_subject(workflow=workflow, node=node)
        )
    elif workflow is not None:
        counters = counters.filter(scope=ThrottleScope.WORKFLOW, subject__startswith=f"{workflow}:")
    elif node is not None:
        counters = counters.filter(scope=ThrottleScope.WORKFLOW, subject__endswith=f":{node}")
    if recipient is not None:
        counters = counters.filter(scope=ThrottleScope.RECIPIENT, subject=recipient)
    return counters


def throttle_reset(
    *,
    scope: str,
    key: str,
    workflow: str | None = None,
    node: str | None = None,
    recipient: str | None = None,
) -> int:
    """Delete the counters of ``key`` in ``scope`` (narrowed to one workflow, one node
    of it, or one recipient): their keys have room at once. Returns how many."""
    deleted, _ = _matching(
        scope=scope, key=key, workflow=workflow, node=node, recipient=recipient
    ).delete()
    return deleted


def throttles_list(
    *,
    scope: str | None = None,
    key: str | None = None,
    workflow: str | None = None,
    node: str | None = None,
    recipient: str | None = None,
) -> QuerySet[ThrottleCounter]:
    """The counters matching every filter given, oldest first (``throttle_state`` says
    what each holds now)."""
    return _matching(
        scope=scope, key=key, workflow=workflow, node=node, recipient=recipient
    ).order_by("id")


def throttle_state(counter: ThrottleCounter, *, now: datetime) -> ThrottleState:
    """The counter's hits in its window at ``now``, the oldest of them, and when it has
    room again (for the list and the console)."""
    at = epoch_ms(now)
    in_window = sorted(h for h in counter.hits if h > at - counter.window_ms)
    oldest = from_epoch_ms(in_window[0]) if in_window else None
    next_room = now
    if len(in_window) >= counter.limit:
        next_room = from_epoch_ms(in_window[len(in_window) - counter.limit] + counter.window_ms)
    return ThrottleState(count=len(in_window), oldest_hit=oldest, next_room_at=next_room)


def expired_counters_purge(*, cutoff: datetime, batch: int = 500) -> int:
    """Delete the throttle counters last written before ``cutoff`` whose every hit has
    also left their window (``updated_at`` + ``window_ms``, the window of the node that
    last wrote them): such a counter counts nothing - the next pass of its key would
    find the window empty - but one per recipient and key piled up for ever. Returns
    how many went.

    A pass that writes a counter meanwhile moves its ``updated_at`` past ``cutoff``,
    and the DELETE re-checks that under the row's lock: a counter in use is never
    deleted (the next pass of a deleted key simply starts a new one)."""
    now = timezone.now()
    done = 0
    after = 0
    while True:
        rows = list(
            # A daily job, the one reader by age alone: a scan, not an index of its own.
            ThrottleCounter.objects.filter(updated_at__lt=cutoff, pk__gt=after)
            .order_by("pk")
            .values_list("pk", "updated_at", "window_ms")[:batch]
        )
        if not rows:
            return done
        after = rows[-1][0]
        expired = [
            pk
            for pk, updated_at, window_ms in rows
            if updated_at + timedelta(milliseconds=window_ms) < now
        ]
        if expired:
            deleted, _ = ThrottleCounter.objects.filter(
                pk__in=expired, updated_at__lt=cutoff
            ).delete()
            done += deleted
