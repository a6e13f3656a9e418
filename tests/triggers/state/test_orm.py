"""The ORM instance store (SQLite, ``make run``): each new instance with its creation
audit row and interests; a taken key inserts nothing and finds its holder; a fan-out's
batch gets one instance per recipient not yet served. SQLite only: on PostgreSQL the
history tables refuse the ORM's after-insert touch-ups and the store is
``PostgresInstanceStore`` (the same behaviour through ``triggers.state`` on both
databases: test_creation.py)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from notifyflow.db import is_postgres
from tests.factories import RecipientFactory, WorkflowFactory, new_instance
from triggers.models import TriggerInstance, TriggerStatusChange
from triggers.models.inbox import Interest
from triggers.state.orm import OrmInstanceStore

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.django_db,
    pytest.mark.skipif(is_postgres(), reason="the ORM store is SQLite's"),
]

STORE = OrmInstanceStore()


def test_each_instance_is_written_with_its_audit_row_and_interests():
    wf = WorkflowFactory()
    now = timezone.now()
    new = new_instance(wf, "k", interests=["order:1"], lane="high", concurrency_key="t1")
    assert STORE.insert_many([new], now, "ann") == {new.id}
    instance = TriggerInstance.objects.get(pk=new.id)
    assert (instance.lane, instance.concurrency_key, instance.created_at) == ("high", "t1", now)
    audit = TriggerStatusChange.objects.filter(instance=instance)
    assert list(audit.values_list("from_status", "to_status", "reason", "actor", "at")) == [
        ("", "enqueued", "created", "ann", now)
    ]
    assert list(Interest.objects.filter(instance=instance).values_list("subject", flat=True)) == [
        "order:1"
    ]


def test_a_taken_key_inserts_nothing_and_finds_its_holder():
    store = STORE
    wf = WorkflowFactory()
    now = timezone.now()
    first = new_instance(wf, "k")
    assert store.insert_or_find(first, now, "t", wf) == (True, None)
    assert store.insert_many([new_instance(wf, "k")], now, "t") == set()
    created, holder = store.insert_or_find(new_instance(wf, "k"), now, "t", wf)
    assert not created and holder is not None and holder.pk == first.id
    assert TriggerInstance.objects.count() == 1


def test_a_fan_out_batch_gets_one_instance_per_recipient_not_yet_served():
    store = STORE
    wf = WorkflowFactory()
    for recipient_id in ("a", "b"):
        RecipientFactory(id=recipient_id)
    now = timezone.now()
    made = store.insert_for_recipients(
        new_instance(wf, "issue", lane="bulk"), ["a", "b"], now, "fanout"
    )
    assert len(made) == 2
    assert store.insert_for_recipients(new_instance(wf, "issue"), ["a", "b"], now, "fanout") == []
    rows = TriggerInstance.objects.filter(idempotency_key="issue")
    assert sorted(rows.values_list("recipient_id", "lane")) == [("a", "bulk"), ("b", "bulk")]
