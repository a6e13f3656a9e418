"""The in-app feed's services: write an item (the ``in_app`` node), read a
recipient's feed and counts, mark items seen/read/unread/archived/unarchived one at a
time or in bulk, and drop a person's feed (erasure).

The counter row (``FeedCounter``) moves with every change, exactly: in the change's
statement on PostgreSQL, in its transaction elsewhere (``feed.store``: one store class
per database, ``FEED_STORE``).

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

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from notifyflow.errors import ApplicationError, NotFoundError
from notifyflow.ids import uuid7

from .models import FeedCounter, FeedItem
from .store import FEED_STORE, NO_FEED, Action, FeedChange, FeedCounts, existing_item, read_counts

__all__ = [
    "ACTIONS",
    "ARCHIVED",
    "MAX_BULK_IDS",
    "NO_FEED",
    "STATUSES",
    "Action",
    "FeedChange",
    "FeedCounts",
    "FeedWrite",
    "feed_bulk_mark",
    "feed_counts",
    "feed_erase",
    "feed_item_mark",
    "feed_item_or_404",
    "feed_item_write",
    "feed_items",
]

# At most this many ids in one bulk request ("all" has no limit: it is one statement).
MAX_BULK_IDS = 1_000


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
    inserted = FEED_STORE.insert_item(values)
    if inserted is not None:
        return FeedWrite(inserted, True)
    existing = existing_item(instance_id, node_id)
    assert existing is not None  # the conflicting row: items are never deleted alone
    return FeedWrite(existing, False)


# --- reads ---------------------------------------------------------------------------


def feed_counts(*, recipient_id: str) -> FeedCounts:
    """The recipient's counts: one primary-key read of its counter row (never a count
    of its items). No row (no item yet, or erased): zeros. (The polled
    ``GET /feed/counts/`` reads them with its token's check:
    ``feed_tokens.feed_token_counts``.)"""
    return read_counts(recipient_id)


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
    return FEED_STORE.change(recipient_id, action, ids, now)


# --- erasure -------------------------------------------------------------------------


def feed_erase(*, recipient_id: str) -> int:
    """Delete the recipient's feed items and counter (inside the erasure's
    transaction); the number of items deleted."""
    # A plain DELETE by the indexed recipient (nothing depends on a feed item, so the
    # ORM deletes without loading the rows).
    deleted, _ = FeedItem.objects.filter(recipient_id=recipient_id).delete()
    FeedCounter.objects.filter(recipient_id=recipient_id).delete()
    return deleted
