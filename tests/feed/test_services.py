"""The feed's services (``feed.services``): each action changes what it says, is
idempotent, and moves the counter exactly as the module's table says (archived items
are not counted); bulk actions by ids or "all" touch only the recipient's own items;
the counts are one read of the counter row; erasure drops the feed. The counter stays
exact under concurrent writers (threads on real PostgreSQL)."""

from __future__ import annotations

import random
import threading
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from executions.erasure import recipient_erase
from feed.models import FeedCounter, FeedItem
from feed.services import (
    NO_FEED,
    FeedCounts,
    feed_bulk_mark,
    feed_counts,
    feed_item_mark,
    feed_item_write,
    feed_items,
)
from notifyflow import db
from notifyflow.errors import ApplicationError, NotFoundError
from tests.factories import FeedWorkflowFactory, RecipientFactory, TriggerInstanceFactory
from tests.factories import feed_items as make_items

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _counts(person) -> tuple[int, int]:
    counts = feed_counts(recipient_id=person.pk)
    return counts.unread_count, counts.unseen_count


def _exact(person) -> tuple[int, int]:
    """The counts recomputed from the items (what the counter must always equal)."""
    live = FeedItem.objects.filter(recipient=person, archived_at__isnull=True)
    return live.filter(read_at__isnull=True).count(), live.filter(seen_at__isnull=True).count()


def _mark(person, item, action):
    return feed_item_mark(
        recipient_id=person.pk, item_id=item.pk, action=action, now=timezone.now()
    )


def test_a_new_item_counts_unread_and_unseen():
    person = RecipientFactory()
    make_items(person, 3)
    assert _counts(person) == (3, 3)
    assert feed_counts(recipient_id=person.pk).version == 3


def test_writing_the_same_instance_and_node_twice_keeps_one_item():
    person = RecipientFactory()
    workflow = FeedWorkflowFactory()
    instance = TriggerInstanceFactory(workflow=workflow, recipient=person)
    write = dict(
        recipient_id=person.pk,
        workflow_id=workflow.pk,
        instance_id=instance.pk,
        node_id="bell",
        title="t",
        body="b",
        url="",
        category="",
        data={},
        now=timezone.now(),
    )
    first, again = feed_item_write(**write), feed_item_write(**write)
    assert first.created and not again.created
    assert first.item_id == again.item_id
    assert FeedItem.objects.count() == 1
    assert _counts(person) == (1, 1)


@pytest.mark.parametrize(
    ("action", "column", "counts"),
    [
        ("seen", "seen_at", (2, 1)),
        ("read", "read_at", (1, 2)),
        ("archive", "archived_at", (1, 1)),
    ],
)
def test_an_action_sets_its_column_and_moves_its_counts(action, column, counts):
    person = RecipientFactory()
    item, _ = make_items(person, 2)
    marked = _mark(person, item, action)
    assert getattr(marked, column) is not None
    assert _counts(person) == counts
    # Idempotent: again changes nothing, counts included.
    version = feed_counts(recipient_id=person.pk).version
    assert getattr(_mark(person, item, action), column) == getattr(marked, column)
    assert _counts(person) == counts
    assert feed_counts(recipient_id=person.pk).version == version


def test_read_does_not_mark_seen_and_unread_counts_again():
    person = RecipientFactory()
    (item,) = make_items(person, 1)
    assert _mark(person, item, "read").seen_at is None
    assert _counts(person) == (0, 1)
    assert _mark(person, item, "unread").read_at is None
    assert _counts(person) == (1, 1)


def test_archived_items_leave_the_counts_and_come_back_unarchived():
    person = RecipientFactory()
    read, unread = make_items(person, 2)
    _mark(person, read, "read")
    _mark(person, read, "seen")
    assert _counts(person) == (1, 1)
    _mark(person, read, "archive")
    _mark(person, unread, "archive")
    assert _counts(person) == (0, 0)
    # Read or seen while archived: nothing to count either way.
    _mark(person, unread, "seen")
    assert _counts(person) == (0, 0)
    _mark(person, unread, "unarchive")
    assert _counts(person) == (1, 0)
    _mark(person, read, "unarchive")
    assert _counts(person) == (1, 0) == _exact(person)


def test_another_recipients_item_is_not_found_and_unchanged():
    ada, bob = RecipientFactory(), RecipientFactory()
    (item,) = make_items(ada, 1)
    with pytest.raises(NotFoundError):
        _mark(bob, item, "read")
    assert FeedItem.objects.get(pk=item.pk).read_at is None
    assert _counts(ada) == (1, 1)


def test_an_unknown_action_is_refused_naming_the_field():
    person = RecipientFactory()
    (item,) = make_items(person, 1)
    with pytest.raises(ApplicationError) as caught:
        _mark(person, item, "delete")
    assert (caught.value.code, caught.value.field) == ("invalid_choice", "action")


def test_bulk_by_ids_changes_only_the_recipient_s_items_that_need_it():
    ada, bob = RecipientFactory(), RecipientFactory()
    items = make_items(ada, 4)
    (bobs,) = make_items(bob, 1)
    _mark(ada, items[0], "read")
    ids = [i.pk for i in items[:3]] + [bobs.pk, uuid.uuid4()]
    change = feed_bulk_mark(recipient_id=ada.pk, action="read", ids=ids, now=timezone.now())
    assert change.changed == 2
    assert (change.counts.unread_count, change.counts.unseen_count) == (1, 4)
    assert FeedItem.objects.get(pk=bobs.pk).read_at is None
    assert _counts(bob) == (1, 1)


def test_bulk_all_marks_every_item_and_moves_the_counter_in_one_statement():
    person = RecipientFactory()
    make_items(person, 5)
    with CaptureQueriesContext(connection) as queries:
        change = feed_bulk_mark(recipient_id=person.pk, action="seen", ids=None, now=timezone.now())
    assert change.changed == 5
    assert _counts(person) == (5, 0) == _exact(person)
    if db.is_postgres():
        updates = [q["sql"] for q in queries if " SET " in q["sql"]]
        assert len(updates) == 1
        assert "UPDATE executions_feeditem" in updates[0].replace('"', "")
        assert "UPDATE executions_feedcounter" in updates[0].replace('"', "")


def test_bulk_with_too_many_ids_is_refused():
    person = RecipientFactory()
    with pytest.raises(ApplicationError) as caught:
        feed_bulk_mark(
            recipient_id=person.pk, action="read", ids=[uuid.uuid4()] * 1001, now=timezone.now()
        )
    assert (caught.value.code, caught.value.field) == ("too_many_ids", "ids")


def test_a_recipient_without_a_feed_has_zero_counts_and_nothing_to_change():
    person = RecipientFactory()
    assert feed_counts(recipient_id=person.pk) == NO_FEED
    change = feed_bulk_mark(recipient_id=person.pk, action="read", ids=None, now=timezone.now())
    assert change.changed == 0


def test_the_counts_are_one_read_of_the_counter_row_never_a_count():
    person = RecipientFactory()
    make_items(person, 3)
    with CaptureQueriesContext(connection) as queries:
        feed_counts(recipient_id=person.pk)
    assert len(queries) == 1
    sql = queries[0]["sql"].lower()
    assert "count(" not in sql and "executions_feedcounter" in sql


def test_the_polled_counts_read_agrees_with_the_logged_one_and_the_row():
    # PostgreSQL answers a poll straight on psycopg's connection; a connection that logs
    # queries takes Django's cursor: both read the row the ORM reads.
    person = RecipientFactory()
    item, _ = make_items(person, 2)
    _mark(person, item, "read")
    polled = feed_counts(recipient_id=person.pk)
    with CaptureQueriesContext(connection):
        logged = feed_counts(recipient_id=person.pk)
    row = FeedCounter.objects.get(pk=person.pk)
    assert polled == logged == FeedCounts(row.unread_count, row.unseen_count, row.version)
    assert (polled.unread_count, polled.unseen_count) == (1, 2)


def test_filters_select_by_status_and_archived():
    person = RecipientFactory()
    read, seen, archived, fresh = make_items(person, 4)
    _mark(person, read, "read")
    _mark(person, seen, "seen")
    _mark(person, archived, "archive")

    def ids(**filters):
        return {i.pk for i in feed_items(recipient_id=person.pk, **filters)}

    assert ids() == {read.pk, seen.pk, fresh.pk}
    assert ids(status="unread") == {seen.pk, fresh.pk}
    assert ids(status="unseen") == {read.pk, fresh.pk}
    assert ids(archived="only") == {archived.pk}
    assert ids(archived="include") == {read.pk, seen.pk, archived.pk, fresh.pk}


def test_erasure_removes_the_feed_and_its_counter_and_nobody_elses():
    ada, bob = RecipientFactory(), RecipientFactory()
    make_items(ada, 2)
    make_items(bob, 1)
    recipient_erase(recipient_id=ada.pk, actor="test")
    assert not FeedItem.objects.filter(recipient_id=ada.pk).exists()
    assert not FeedCounter.objects.filter(recipient_id=ada.pk).exists()
    assert feed_counts(recipient_id=ada.pk) == NO_FEED
    assert _counts(bob) == (1, 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_counts_stay_exact_under_concurrent_writers():
    person = RecipientFactory()
    workflow = FeedWorkflowFactory()
    items = make_items(person, 30, workflow=workflow)
    instances = [TriggerInstanceFactory(workflow=workflow, recipient=person) for _ in range(8)]
    n = 16
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    actions = ["seen", "read", "unread", "archive", "unarchive"]

    def writer(index: int) -> None:
        rng = random.Random(index)
        try:
            barrier.wait()
            for step in range(15):
                now = timezone.now()
                if index < len(instances) and step == 0:
                    feed_item_write(
                        recipient_id=person.pk,
                        workflow_id=workflow.pk,
                        instance_id=instances[index].pk,
                        node_id="bell",
                        title="racing",
                        body="",
                        url="",
                        category="",
                        data={},
                        now=now,
                    )
                elif step % 5 == 4:
                    feed_bulk_mark(
                        recipient_id=person.pk, action=rng.choice(actions), ids=None, now=now
                    )
                else:
                    chosen = rng.sample(items, 3)
                    feed_bulk_mark(
                        recipient_id=person.pk,
                        action=rng.choice(actions),
                        ids=[i.pk for i in chosen],
                        now=now,
                    )
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert FeedItem.objects.filter(recipient=person).count() == 38
    assert _counts(person) == _exact(person)
