"""How the feed's writes reach the database: ``FeedStore``, one class per database,
chosen once (``FEED_STORE``), with the shapes they take and return.

The counter row (``FeedCounter``) moves with every change, exactly:

- ``PostgresFeedStore``: in the SAME statement as the change. An action locks the
  recipient's counter row (``LOCK_COUNTER``: every writer of a feed queues there, so
  two bulk actions never deadlock on item rows and each sees the rows as the one before
  left them), then runs one statement (``change_sql``): the UPDATE of the items returns
  the rows it changed (with their other states, as the change left them) and the
  counter moves by what they add up to. A new item is ``INSERT … ON CONFLICT (instance,
  node) DO NOTHING`` and the counter's upsert from what it inserted, one statement
  (``INSERT_ITEM``: it changes no existing row, so it needs no lock first).
- ``OrmFeedStore`` (SQLite: tests, development): the same in one transaction (its
  writes are serialized).

(``feed.services`` has the table of which count each action moves.)
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q

from notifyflow import db

from .models import FeedCounter, FeedItem

# --- the shapes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One of the feed actions: the column it sets (to now) or clears, and which of
    the item's other states decide whether each count moves (see ``feed.services``)."""

    column: str
    sets: bool
    # The column whose NULL (on the changed row) moves each count; None: it does not.
    unread_when: str | None
    unseen_when: str | None

    @property
    def sign(self) -> int:
        """Setting seen/read/archived lowers the counts; clearing them raises them."""
        return -1 if self.sets else 1


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


# --- reads both stores share ---------------------------------------------------------

COUNTS = (
    f"SELECT unread_count, unseen_count, version FROM {FeedCounter._meta.db_table} "
    f"WHERE recipient_id = %s"
)


def read_counts(recipient_id: str) -> FeedCounts:
    """The recipient's counts: one primary-key read of its counter row (never a count
    of its items); zeros without one."""
    row = db.fetch_prepared(COUNTS, [recipient_id])
    return NO_FEED if row is None else FeedCounts(int(row[0]), int(row[1]), int(row[2]))


def existing_item(instance_id: uuid.UUID, node_id: str) -> uuid.UUID | None:
    return (
        FeedItem.objects.filter(instance_id=instance_id, node_id=node_id)
        .values_list("id", flat=True)
        .first()
    )


# --- the stores ----------------------------------------------------------------------


class FeedStore(Protocol):
    def insert_item(self, values: dict[str, Any]) -> uuid.UUID | None:
        """Write the item ``values`` describes and count it (unread and unseen): its id,
        or None when its (instance, node) had one (nothing written)."""
        ...

    def change(
        self, recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
    ) -> FeedChange:
        """Apply ``action`` to the recipient's items ``ids`` (None: all) and move the
        counter by what changed."""
        ...


_ITEM, _COUNTER = FeedItem._meta.db_table, FeedCounter._meta.db_table
_ITEM_COLUMNS = (
    "id",
    "recipient_id",
    "workflow_id",
    "instance_id",
    "node_id",
    "title",
    "body",
    "url",
    "category",
    "data",
    "created_at",
)

# The item, unless its (instance, node) has one, and its recipient's counter moved by
# what was inserted (created at one), one statement; returns the new item's id.
INSERT_ITEM = (
    f"WITH inserted AS ("
    f"INSERT INTO {_ITEM} ({', '.join(_ITEM_COLUMNS)}) "
    f"VALUES ({', '.join(f'%({c})s' for c in _ITEM_COLUMNS)}) "
    f"ON CONFLICT (instance_id, node_id) DO NOTHING RETURNING id, recipient_id), "
    f"counted AS ("
    f"INSERT INTO {_COUNTER} (recipient_id, unread_count, unseen_count, version) "
    f"SELECT recipient_id, 1, 1, 1 FROM inserted "
    f"ON CONFLICT (recipient_id) DO UPDATE SET "
    f"unread_count = {_COUNTER}.unread_count + 1, "
    f"unseen_count = {_COUNTER}.unseen_count + 1, "
    f"version = {_COUNTER}.version + 1) "
    f"SELECT id FROM inserted"
)

# The recipient's counter row locked, before a change (no row: no item yet).
LOCK_COUNTER = f"SELECT 1 FROM {_COUNTER} WHERE recipient_id = %s FOR UPDATE"


@functools.cache
def change_sql(action: Action, by_ids: bool) -> str:
    """An action's statement (one per action and ``by_ids``): ``changed`` - the items'
    UPDATE returning the changed rows' states -, ``delta`` - what they move each count
    by -, ``moved`` - the counter's UPDATE when something changed; returns the number
    changed and the counter's new values."""
    col = action.column
    condition = f"{col} IS NULL" if action.sets else f"{col} IS NOT NULL"
    value = "%(now)s" if action.sets else "NULL"

    def moved(column: str | None) -> str:
        if column is None:
            return "0"
        return f"{action.sign} * count(*) FILTER (WHERE {column} IS NULL)"

    return (
        f"WITH changed AS ("
        f"UPDATE {_ITEM} SET {col} = {value} "
        f"WHERE recipient_id = %(recipient)s AND {condition}"
        + (" AND id = ANY(%(ids)s)" if by_ids else "")
        + " RETURNING read_at, seen_at, archived_at), "
        f"delta AS (SELECT count(*) AS n, {moved(action.unread_when)} AS unread, "
        f"{moved(action.unseen_when)} AS unseen FROM changed), "
        f"moved AS ("
        f"UPDATE {_COUNTER} SET unread_count = {_COUNTER}.unread_count + delta.unread, "
        f"unseen_count = {_COUNTER}.unseen_count + delta.unseen, "
        f"version = {_COUNTER}.version + 1 "
        f"FROM delta WHERE {_COUNTER}.recipient_id = %(recipient)s AND delta.n > 0 "
        f"RETURNING unread_count, unseen_count, version) "
        f"SELECT delta.n, moved.unread_count, moved.unseen_count, moved.version "
        f"FROM delta LEFT JOIN moved ON true"
    )


class PostgresFeedStore(FeedStore):
    """Each write one statement (a change after its counter's lock)."""

    def insert_item(self, values: dict[str, Any]) -> uuid.UUID | None:
        params = dict(values)
        params["data"] = FeedItem._meta.get_field("data").get_db_prep_value(
            values["data"], connection, prepared=False
        )
        with connection.cursor() as cursor:
            cursor.execute(INSERT_ITEM, params)
            row = cursor.fetchone()
        return None if row is None else row[0]

    def change(
        self, recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
    ) -> FeedChange:
        params: dict[str, Any] = {"recipient": recipient_id, "now": now}
        if ids is not None:
            params["ids"] = list(ids)
        with transaction.atomic(), connection.cursor() as cursor:
            # The counter row's lock first, in a statement of its own: every writer of
            # the feed queues on it, and the change's statement then starts (READ
            # COMMITTED: takes its snapshot) after the writer before it committed - it
            # sees the rows as they are, never a version a racing writer has replaced.
            cursor.execute(LOCK_COUNTER, [recipient_id])
            if cursor.fetchone() is None:  # no counter: no item yet
                return FeedChange(0, NO_FEED)
            cursor.execute(change_sql(action, ids is not None), params)
            changed, unread, unseen, version = cursor.fetchone()
        if not changed:
            return FeedChange(0, read_counts(recipient_id))
        return FeedChange(int(changed), FeedCounts(int(unread), int(unseen), int(version)))


class OrmFeedStore(FeedStore):
    """The same writes through the ORM, each in one transaction (SQLite)."""

    def insert_item(self, values: dict[str, Any]) -> uuid.UUID | None:
        try:
            with transaction.atomic():
                if existing_item(values["instance_id"], values["node_id"]) is not None:
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
            if existing_item(values["instance_id"], values["node_id"]) is None:
                raise  # not the (instance, node) constraint: the recipient went meanwhile
            return None  # another writer of the same (instance, node) came first
        return values["id"]

    def change(
        self, recipient_id: str, action: Action, ids: Sequence[uuid.UUID] | None, now: datetime
    ) -> FeedChange:
        with transaction.atomic():
            # A write first: SQLite takes its write lock, so nothing changes the feed
            # between the read of the rows and their update.
            if not FeedCounter.objects.filter(recipient_id=recipient_id).update(
                version=F("version")
            ):
                return FeedChange(0, NO_FEED)
            pending = FeedItem.objects.filter(
                Q(**{f"{action.column}__isnull": action.sets}), recipient_id=recipient_id
            )
            if ids is not None:
                pending = pending.filter(pk__in=list(ids))
            rows = [dict(row) for row in pending.values("pk", "read_at", "seen_at", "archived_at")]
            if not rows:
                return FeedChange(0, read_counts(recipient_id))
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
            return FeedChange(len(rows), read_counts(recipient_id))


FEED_STORE: FeedStore = db.per_database(postgres=PostgresFeedStore, other=OrmFeedStore)
