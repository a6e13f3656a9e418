"""The creation INSERTs on PostgreSQL (``PostgresCreation``): one trigger's recipients
with ids made by PostgreSQL, a batch whose rows differ in every column, a taken key
answered with its holder - each instance with its audit and interest rows, nothing
written for a key already taken."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from django.utils import timezone

from tests.factories import PAYLOAD, RecipientFactory, WorkflowFactory, new_instance
from triggers.models import TriggerInstance, TriggerStatusChange
from triggers.models.inbox import Interest
from triggers.state.postgres import PostgresInstanceStore

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

STORE = PostgresInstanceStore()


def test_one_triggers_recipients_get_ids_made_by_postgresql_and_a_served_one_is_skipped():
    wf = WorkflowFactory()
    people = [RecipientFactory() for _ in range(4)]
    now = timezone.now()
    row = new_instance(wf, "launch", lane="bulk")

    first = STORE.insert_for_recipients(row, [p.pk for p in people[:3]], now, "fanout")
    again = STORE.insert_for_recipients(row, [people[1].pk, people[3].pk], now, "fanout")

    assert len(first) == 3 and len(again) == 1
    ids = [uuid.UUID(found) for found in first + again]
    assert all(found.version == 7 for found in ids)  # time-ordered, made per row
    instances = TriggerInstance.objects.filter(pk__in=ids)
    assert sorted(i.recipient_id for i in instances) == sorted(p.pk for p in people)
    assert {(i.idempotency_key, i.lane, i.current_node_id) for i in instances} == {
        ("launch", "bulk", "hello")
    }
    assert TriggerStatusChange.objects.filter(instance_id__in=ids, actor="fanout").count() == 4


def test_a_batch_whose_rows_differ_keeps_each_rows_own_values_and_interests():
    first_wf, second_wf = WorkflowFactory(), WorkflowFactory()
    person = RecipientFactory()
    rows = [
        new_instance(first_wf, "a", concurrency_key="tenant-1", interests=["order:1"]),
        new_instance(
            second_wf, "b", lane="high", recipient_id=person.pk, interests=["order:2", "x"]
        ),
        replace(new_instance(first_wf, "c"), payload={"n": 3}),
    ]

    assert STORE.insert_many(rows, timezone.now(), "api") == {row.id for row in rows}

    a, b, c = (TriggerInstance.objects.get(pk=row.id) for row in rows)
    assert (a.workflow_id, a.concurrency_key, a.lane) == (first_wf.pk, "tenant-1", "normal")
    assert (b.workflow_id, b.recipient_id, b.lane, b.concurrency_key) == (
        second_wf.pk,
        person.pk,
        "high",
        None,
    )
    assert c.payload == {"n": 3} and a.payload == PAYLOAD
    interests = sorted(Interest.objects.values_list("instance_id", "subject"))
    assert interests == sorted([(a.pk, "order:1"), (b.pk, "order:2"), (b.pk, "x")])


def test_a_taken_key_is_answered_with_its_holder_and_nothing_is_written():
    wf = WorkflowFactory()
    now = timezone.now()
    holder = new_instance(wf, "once")
    assert STORE.insert_or_find(holder, now, "api", wf) == (True, None)

    repeat = new_instance(wf, "once", interests=["order:9"])
    created, found = STORE.insert_or_find(repeat, now, "api", wf)

    assert not created and found is not None and found.pk == holder.id
    assert not TriggerInstance.objects.filter(pk=repeat.id).exists()
    assert not Interest.objects.filter(instance_id=repeat.id).exists()
    assert TriggerStatusChange.objects.filter(instance__workflow=wf).count() == 1
