"""The feed's store for this database (``FEED_STORE``): an item written and counted once
per (instance, node), a change moving the counter by exactly what it changed. Run on
both databases, so both stores keep the same contract."""

from __future__ import annotations

import pytest
from django.utils import timezone

from feed.models import FeedItem
from feed.services import ACTIONS
from feed.store import FEED_STORE, NO_FEED, FeedCounts, existing_item, read_counts
from notifyflow.ids import uuid7
from tests.factories import FeedWorkflowFactory, RecipientFactory, TriggerInstanceFactory

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _values(recipient, workflow, instance) -> dict:
    return dict(
        id=uuid7(),
        recipient_id=recipient.pk,
        workflow_id=workflow.pk,
        instance_id=instance.pk,
        node_id="bell",
        title="Hello",
        body="",
        url="",
        category="comments",
        data={"n": 1},
        created_at=timezone.now(),
    )


def test_an_item_is_written_and_counted_once_per_instance_and_node():
    person, workflow = RecipientFactory(), FeedWorkflowFactory()
    instance = TriggerInstanceFactory(workflow=workflow, recipient=person)
    first = _values(person, workflow, instance)

    assert FEED_STORE.insert_item(first) == first["id"]
    assert FEED_STORE.insert_item(_values(person, workflow, instance)) is None

    assert existing_item(instance.pk, "bell") == first["id"]
    assert FeedItem.objects.filter(recipient=person).count() == 1
    assert read_counts(person.pk) == FeedCounts(1, 1, 1)


def test_a_change_moves_the_counter_by_what_it_changed_and_nothing_else():
    person, workflow = RecipientFactory(), FeedWorkflowFactory()
    ids = []
    for _ in range(3):
        instance = TriggerInstanceFactory(workflow=workflow, recipient=person)
        values = _values(person, workflow, instance)
        FEED_STORE.insert_item(values)
        ids.append(values["id"])
    now = timezone.now()

    read = FEED_STORE.change(person.pk, ACTIONS["read"], ids[:2], now)
    again = FEED_STORE.change(person.pk, ACTIONS["read"], ids[:2], now)

    assert (read.changed, read.counts) == (2, FeedCounts(1, 3, 4))
    assert (again.changed, again.counts) == (0, FeedCounts(1, 3, 4))  # already read
    everything = FEED_STORE.change(person.pk, ACTIONS["archive"], None, now)
    assert (everything.changed, everything.counts) == (3, FeedCounts(0, 0, 5))


def test_a_recipient_without_a_feed_changes_nothing_and_counts_zeros():
    person = RecipientFactory()
    change = FEED_STORE.change(person.pk, ACTIONS["seen"], None, timezone.now())
    assert (change.changed, change.counts) == (0, NO_FEED)
    assert read_counts(person.pk) == NO_FEED
