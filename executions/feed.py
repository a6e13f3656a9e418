"""The in-app feed's services (SPEC §14): write an item (the ``in_app`` node), read a
recipient's feed and counts, mark items seen/read/unread/archived/unarchived one at a
time or in bulk, and drop a person's feed (erasure).

The counter row (``FeedCounter``) moves with every change, exactly:

- PostgreSQL: in the SAME statement as the change. An action locks the recipient's
  counter row (``SELECT … FOR UPDATE``: every writer of a feed queues there, so two bulk
  actions never deadlock on item rows and each sees the rows as the one before left
  them), then runs one statement: the UPDATE of the items returns the rows it changed
  (with their other states, as the change left them) and the counter moves by what
  they add up to. A new item is ``INSERT … ON CONFLICT (instance, node) DO NOTHING``
  and the counter's upsert from what it inserted, one statement (it changes no
  existing row, so it needs no lock first).
- SQLite (tests, development): the same in one transaction (its writes are serialized).

Every action changes one column, and the counts exclude archived items, so a changed
row moves a count by one, decided by the row's other columns:

=========  ===============  ============================
action     unread_count     unseen_count
=========  ===============  ============================
seen       -                -1 if not archived
read       -1 if not arch.  -
unread     +1 if not arch.  -
archive    -1 if unread     -1 if unseen
unarchive  +1 if unread     +1 if unseen
=========  ===============  ============================

Marking an item read does not mark it seen: a front end marks the feed seen when it
opens it and an item read when it is clicked (``seen`` then ``read`` in bulk if it
wants both).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, QuerySet

from notifyflow import db
from notifyflow.errors import ApplicationError, NotFoundError
from notifyflow.ids import uuid7

from .feed_models import FeedCounter, FeedItem

# At most this many ids in one bulk request ("all" has no limit: it is one statement).
MAX_BULK_IDS = 1_000


@dataclass(frozen=True)
class Action:
    """One of the feed actions: the column it sets (to now) or clears, and which of
    the item's other states decide whether each count moves (see the module's table)."""

    column: str
    sets: bool
    # The column whose NULL (on the changed row) moves each count; None: it does not.
    unread_when: str | None
    unseen_when: str | None

    @property
    def sign(self) -> int:
        """Setting seen/read/archived lowers the counts; clearing them raises them."""
        return -1 if self.sets else 1


ACTIONS: dict[str, Action] = {
    "seen": Action("seen_at", True, None, "archived_at"),
    "read": Action("read_at", True, "archived_at", None),
    "unread": Action("read_at", False, "archived_at", None),
    "archive": Action("archived_at", True, "read_at", "seen_at"),
    "unarchive": Action("archived_at", False, "read_at", "seen_at"),
}
STATUSES = ("all", "unread", "unseen")
ARCHIVED = ("exclude", "include", "only")


@dataclass(frozen=True)
class FeedCounts:
    """A recipient's counts (archived items excluded) and its feed's version (0: no
    feed yet)."""

    unread_count: int
    unseen_count: int
    version: int

    @property
    def etag(self) -> str:
        # The version changes with every change of the feed; the counts make the tag
        # safe across a person erased and created again (versions start over).
        return f'"{self.version}-{self.unread_count}-{self.unseen_count}"'


NO_FEED = FeedCounts(0, 0, 0)


@dataclass(frozen=True)
class FeedChange:
    """What an action did: how many items it changed, and the counts after it."""

    changed: int
    counts: FeedCounts


@dataclass(frozen=True)
class FeedWrite:
    """The item of an (instance, node); ``created`` False when it existed already."""

    item_id: uuid.UUID
    created: bool


def _action(name: str) -> Action:
    action = ACTIONS.get(name)
    if action is None:
        raise ApplicationError(
            code="invalid_choice",
            field="action",
            message=f"action: must be one of {', '.join(ACTIONS)}",
        )
    return action


# --- the node's write ----------------------------------------------------------------


def feed_item_write(
    *,
    recipient_id: str,
    workflow_id: int,
    instance_id: uuid.UUID,
    node_id: str,
    title: str,
    body: str,
    url: str,
    category: str,
    data: dict[str, Any],
    now: datetime,
) -> FeedWrite:
    """The feed item of (``instance_id``, ``node_id``) for the recipient: written and
    counted (unread and unseen) unless it exists already - a re-run step writes nothing
    twice."""
    values: dict[str, Any] = dict(
        id=uuid7(),
        recipient_id=recipient_id,
        workflow_id=workflow_id,
        instance_id=instance_id,
        node_id=node_id,
        title=title,
        body=body,
        url=url,
        category=category,
        data=data,
        created_at=now,
    )
    if settings.IS_POSTGRES:
        inserted = _write_postgres(values)
    else:
        inserted = _write_orm(values)
    if inserted is not None:
        return FeedWrite(inserted, True)
    existing = _existing_item(instance_id, node_id)
    assert existing is not None  # the conflicting row: items are never deleted alone
    return FeedWrite(existing, False)


def _write_orm(values: dict[str, Any]) -> uuid.UUID | None:
    """The same as ``_write_postgres`` in one transaction (SQLite): the new item's id,
    or None when (instance, node) had one."""
    try:
        with transaction.atomic():
            if _existing_item(values["instance_id"], values["node_id"]) is not None:
                return None
            FeedItem.objects.create(**values)
            recipient_id = values["recipient_id"]
            if not FeedCounter.objects.filter(recipient_id=recipient_id).update(
                unread_count=F("unread_count") + 1,
                unseen_count=F("unseen_count") + 1,
                version=F("version") + 1,
            ):
                FeedCounter.objects.create(
                    recipient_id=recipient_id, unread_count=1, unseen_count=1, version=1
                )
    except IntegrityError:
        if _existing_item(values["instance_id"], values["node_id"]) is None:
            raise  # not the (instance, node) constraint: the recipient went meanwhile
        return None  # another writer of the same (instance, node) came first
    return values["id"]


def _existing_item(instance_id: uuid.UUID, node_id: str) -> uuid.UUID | None:
    return (
        FeedItem.objects.filter(instance_id=instance_id, node_id=node_id)
        .values_list("id", flat=True)
        .first()
    )


@functools.cache
def _insert_sql() -> str:
    item, counter = FeedItem._meta.db_table, FeedCounter._meta.db_table
    columns = (
        "id, recipient_id, workflow_id, instance_id, node_id, title, body, url, category, "
        "data, created_at"
    )
    placeholders = ", ".join(f"%({c.strip()})s" for c in columns.split(","))
    return (
        f"WITH inserted AS ("
        f"INSERT INTO {item} ({columns}) VALUES ({placeholders}) "
        f"ON CONFLICT (instance_id, node_id) DO NOTHING RETURNING id, recipient_id), "
        f"counted AS ("
        f"INSERT INTO {counter} (recipient_id, unread_count, unseen_count, version) "
        f"SELECT recipient_id, 1, 1, 1 FROM inserted "
        f"ON CONFLICT (recipient_id) DO UPDATE SET "
        f"unread_count = {counter}.unread_count + 1, "
        f"unseen_count = {counter}.unseen_count + 1, "
        f"version = {counter}.version + 1) "
        f"SELECT id FROM inserted"
    )


def _write_postgres(values: dict[str, Any]) -> uuid.UUID | None:
    """The new item's id, or None when (instance, node) had one (nothing written)."""
    params = dict(values)
    params["data"] = FeedItem._meta.get_field("data").get_db_prep_value(
        values["data"], connection, prepared=False
    )
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(), params)
        row = cursor.fetchone()
    return None if row is None else row[0]


# --- reads ---------------------------------------------------------------------------


@functools.cache
def _counts_sql() -> str:
    return (
        f"SELECT unread_count, unseen_count, version FROM {FeedCounter._meta.db_table} "
        f"WHERE recipient_id = %s"
    )


def feed_counts(*, recipient_id: str) -> FeedCounts:
    """The recipient's counts: one primary-key read of its counter row (never a count
    of its items). No row (no item yet, or erased): zeros. (The polled
    ``GET /feed/counts/`` reads them with its token's check:
    ``feed_tokens.feed_token_counts``.)"""
    row = polled_row(_counts_sql(), [recipient_id])
    return NO_FEED if row is None else FeedCounts(int(row[0]), int(row[1]), int(row[2]))


def polled_row(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """The one row of a polled read. On PostgreSQL straight on psycopg's connection,
    prepared once per connection: ``GET /feed/counts/`` is polled every few seconds by
    every open page, and Django's cursor wrapper (client-side binding, the execute
    wrappers) was a third of its cost (bench/scenarios/feed.py). Same statement, same
    errors (``wrap_database_errors``: a lost database is a 503 as anywhere); a logged
    connection (tests capturing queries, DEBUG) takes Django's cursor
    (tests/executions/test_feed.py compares the two)."""
    wrapper = db.current()
    if wrapper.vendor == "postgresql" and not wrapper.queries_logged:
        wrapper.ensure_connection()
        with wrapper.wrap_database_errors:
            return wrapper.connection.execute(sql, params, prepare=True).fetchone()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def feed_items(*, recipient_id: str, status: str = "all", archived: str = "exclude") -> QuerySet:
    """The recipient's items, filtered (``STATUSES``, ``ARCHIVED``); ordered by the
    caller's paginator (newest first: the ``feed_recipient_*`` indexes)."""
    queryset = FeedItem.objects.filter(recipient_id=recipient_id)
    if status == "unread":
        queryset = queryset.filter(read_at__isnull=True)
    elif status == "unseen":
        queryset = queryset.filter(seen_at__isnull=True)
    if archived == "exclude":
        queryset = queryset.filter(archived_at__isnull=True)
    elif archived == "only":
        queryset = queryset.filter(archived_at__isnull=False)
    return queryset


def feed_item_or_404(*, recipient_id: str, item_id: uuid.UUID) -> FeedItem:
    """The item if it is the recipient's; NotFoundError otherwise (another person's
    item is as unknown as no item)."""
    item = (
        FeedItem.objects.filter(recipient_id=recipient_id, pk=item_id)
        .select_related("workflow")
        .first()
    )
    if item is None:
        raise NotFoundError(code="not_found", field=None, message="no such feed item")
    return item


# --- actions -------------------------------------------------------------------------


def feed_item_mark(
    *, recipient_id: str, item_id: uuid.UUID, action: str, now: datetime
) -> FeedItem:
    """Apply ``action`` to one item of the recipient (idempotent: an item already in
    that state is unchanged) and return it; NotFoundError if it is not theirs."""
    _change(recipient_id, _action(action), [item_id], now)
    return feed_item_or_404(recipient_id=recipient_id, item_id=item_id)


def feed_bulk_mark(
    *, recipient_id: str, action: str, ids: Sequence[uuid.UUID] | None, now: datetime
) -> FeedChange:
    """Apply ``action`` to the recipient's items ``ids`` (None: all of them) in one
    set-based change. Ids that are not theirs are ignored (nothing of another feed is
    revealed or changed)."""
    if ids is not None and len(ids) > MAX_BULK_IDS:
        raise ApplicationError(
            code="too_many_ids", field="ids", message=f"ids: at most {MAX_BULK_IDS}"
        )
    return _change(recipient_id, _action(action), ids, now)


def _change(
    recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
) -> FeedChange:
    if ids is not None and not ids:
        return FeedChange(0, feed_counts(recipient_id=recipient_id))
    if settings.IS_POSTGRES:
        return _change_postgres(recipient_id, action, ids, now)
    return _change_orm(recipient_id, action, ids, now)


@functools.cache
def _lock_sql() -> str:
    return f"SELECT 1 FROM {FeedCounter._meta.db_table} WHERE recipient_id = %s FOR UPDATE"


@functools.cache
def _change_sql(action: Action, by_ids: bool) -> str:
    item, counter = FeedItem._meta.db_table, FeedCounter._meta.db_table
    col = action.column
    condition = f"{col} IS NULL" if action.sets else f"{col} IS NOT NULL"
    value = "%(now)s" if action.sets else "NULL"

    def moved(column: str | None) -> str:
        if column is None:
            return "0"
        return f"{action.sign} * count(*) FILTER (WHERE {column} IS NULL)"

    return (
        f"WITH changed AS ("
        f"UPDATE {item} SET {col} = {value} "
        f"WHERE recipient_id = %(recipient)s AND {condition}"
        + (" AND id = ANY(%(ids)s)" if by_ids else "")
        + " RETURNING read_at, seen_at, archived_at), "
        f"delta AS (SELECT count(*) AS n, {moved(action.unread_when)} AS unread, "
        f"{moved(action.unseen_when)} AS unseen FROM changed), "
        f"moved AS ("
        f"UPDATE {counter} SET unread_count = {counter}.unread_count + delta.unread, "
        f"unseen_count = {counter}.unseen_count + delta.unseen, "
        f"version = {counter}.version + 1 "
        f"FROM delta WHERE {counter}.recipient_id = %(recipient)s AND delta.n > 0 "
        f"RETURNING unread_count, unseen_count, version) "
        f"SELECT delta.n, moved.unread_count, moved.unseen_count, moved.version "
        f"FROM delta LEFT JOIN moved ON true"
    )


def _change_postgres(
    recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
) -> FeedChange:
    params: dict[str, Any] = {"recipient": recipient_id, "now": now}
    if ids is not None:
        params["ids"] = list(ids)
    with transaction.atomic(), connection.cursor() as cursor:
        # The counter row's lock first, in a statement of its own: every writer of the
        # feed queues on it, and the change's statement then starts (READ COMMITTED:
        # takes its snapshot) after the writer before it committed - it sees the rows
        # as they are, never a version a racing writer has replaced.
        cursor.execute(_lock_sql(), [recipient_id])
        if cursor.fetchone() is None:  # no counter: no item yet
            return FeedChange(0, NO_FEED)
        cursor.execute(_change_sql(action, ids is not None), params)
        changed, unread, unseen, version = cursor.fetchone()
    if not changed:
        return FeedChange(0, feed_counts(recipient_id=recipient_id))
    return FeedChange(int(changed), FeedCounts(int(unread), int(unseen), int(version)))


def _change_orm(
    recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
) -> FeedChange:
    """The same as ``_change_postgres`` in one transaction (SQLite)."""
    with transaction.atomic():
        # A write first: SQLite takes its write lock, so nothing changes the feed
        # between the read of the rows and their update.
        if not FeedCounter.objects.filter(recipient_id=recipient_id).update(version=F("version")):
            return FeedChange(0, NO_FEED)
        pending = FeedItem.objects.filter(
            Q(**{f"{action.column}__isnull": action.sets}), recipient_id=recipient_id
        )
        if ids is not None:
            pending = pending.filter(pk__in=list(ids))
        rows = [dict(row) for row in pending.values("pk", "read_at", "seen_at", "archived_at")]
        if not rows:
            return FeedChange(0, feed_counts(recipient_id=recipient_id))
        FeedItem.objects.filter(pk__in=[r["pk"] for r in rows]).update(
            **{action.column: now if action.sets else None}
        )

        def moved(column: str | None) -> int:
            if column is None:
                return 0
            return action.sign * sum(1 for r in rows if r[column] is None)

        FeedCounter.objects.filter(recipient_id=recipient_id).update(
            unread_count=F("unread_count") + moved(action.unread_when),
            unseen_count=F("unseen_count") + moved(action.unseen_when),
            version=F("version") + 1,
        )
        return FeedChange(len(rows), feed_counts(recipient_id=recipient_id))


# --- erasure -------------------------------------------------------------------------


def feed_erase(*, recipient_id: str) -> int:
    """Delete the recipient's feed items and counter (inside the erasure's
    transaction); the number of items deleted."""
    # A plain DELETE by the indexed recipient (nothing depends on a feed item, so the
    # ORM deletes without loading the rows).
    deleted, _ = FeedItem.objects.filter(recipient_id=recipient_id).delete()
    FeedCounter.objects.filter(recipient_id=recipient_id).delete()
    return deleted
