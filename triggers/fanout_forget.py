"""Erasure's part in the list fan-outs: a fan-out's snapshot of its
membership (``FanOut.recipient_ids``) and the ids its request named itself
(``excluded``) no longer hold an erased person's id.

Called first in the erasure's transaction, before the recipient's row is locked:
a job's batch locks its fan-out row (``fanout._fenced``) and, at its commit, checks its
new instances' recipients; taking the fan-out rows first, the erasure waits for such a
batch instead of deadlocking with it. It also locks the running fan-outs that have not
read their membership yet (the job reads it under that lock), so a job reads the
membership before the erasure deletes it - and its snapshot is then cleaned here - or
after (without the person). Which fan-outs name the person is asked of ``FORGET_STORE``
(one store class per database).
"""

from __future__ import annotations

import uuid
from typing import Protocol

from django.db.models import Q
from django.utils import timezone

from notifyflow import db
from notifyflow.celery import send_task_on_commit

from .fanout import FANOUT_TASK
from .models import FanOut, FanOutStatus


def fanouts_forget_recipient(*, recipient_id: str) -> list[uuid.UUID]:
    """Take ``recipient_id`` out of every fan-out's ``recipient_ids`` and ``excluded``,
    in the caller's transaction; the ids of the fan-outs changed.

    ``position`` (how many of ``recipient_ids`` are done) moves back by one when the id
    was among the done ones, so a resumed job starts at the same next recipient;
    ``expected`` drops by one when it was not (it will never be created), so a finished
    fan-out still adds up (``created + duplicates``). A running job changed here loses
    its lease and is sent again after commit: a worker still running it finds its lease
    gone at its next batch and stops, and the new run reads the cleaned snapshot."""
    changed: list[uuid.UUID] = []
    now = timezone.now()
    for fanout in FORGET_STORE.locked(recipient_id):
        ids = list(fanout.recipient_ids or [])
        excluded = [value for value in fanout.excluded or [] if value != recipient_id]
        if recipient_id not in ids and excluded == list(fanout.excluded or []):
            continue  # locked only: it has not read its membership yet, or holds none
        values: dict = {"excluded": excluded, "updated_at": now}
        if recipient_id in ids:
            index = ids.index(recipient_id)
            del ids[index]
            values["recipient_ids"] = ids
            if index < fanout.position:
                values["position"] = fanout.position - 1
            else:
                values["expected"] = max(fanout.expected - 1, 0)
        if fanout.status == FanOutStatus.RUNNING:
            values["locked_until"] = None
            send_task_on_commit(FANOUT_TASK, str(fanout.pk))
        FanOut.objects.filter(pk=fanout.pk).update(**values)
        changed.append(fanout.pk)
    return changed


class FanOutForgetStore(Protocol):
    def locked(self, recipient_id: str) -> list[FanOut]:
        """The fan-outs whose snapshot or exclusions name ``recipient_id``, and the
        running ones without a snapshot yet, locked in id order."""
        ...


_LOCKED_FIELDS = ("pk", "status", "recipient_ids", "excluded", "position", "expected")


class PostgresFanOutForgetStore(FanOutForgetStore):
    """The containment tests are ``jsonb @>`` (a scan of the fan-outs: one row per list
    request)."""

    def locked(self, recipient_id: str) -> list[FanOut]:
        running_unread = Q(status=FanOutStatus.RUNNING, recipient_ids__isnull=True)
        named = Q(recipient_ids__contains=[recipient_id]) | Q(excluded__contains=[recipient_id])
        rows = FanOut.objects.select_for_update().order_by("pk").only(*_LOCKED_FIELDS)
        return list(rows.filter(named | running_unread))


class OrmFanOutForgetStore(FanOutForgetStore):
    """SQLite (one writer at a time) locks them all and filters in Python."""

    def locked(self, recipient_id: str) -> list[FanOut]:
        rows = FanOut.objects.select_for_update().order_by("pk").only(*_LOCKED_FIELDS)
        return [
            fanout
            for fanout in rows
            if (fanout.recipient_ids is None and fanout.status == FanOutStatus.RUNNING)
            or recipient_id in (fanout.recipient_ids or ())
            or recipient_id in (fanout.excluded or ())
        ]


FORGET_STORE: FanOutForgetStore = db.per_database(
    postgres=PostgresFanOutForgetStore, other=OrmFanOutForgetStore
)
