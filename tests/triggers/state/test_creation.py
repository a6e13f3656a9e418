"""Creating instances in the state machine (``create_or_find``, ``create_bulk``,
``create_for_recipients``): each new instance enqueued at its entry node, due now, with
its creation audit row and interest rows; a taken (workflow, idempotency_key) - or
(recipient, workflow, key) - inserts nothing and raises nothing. Runs on both databases
(a PostgreSQL statement next to its ORM twin)."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from tests.factories import PAYLOAD, RecipientFactory, WorkflowFactory, new_instance
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.models.inbox import Interest

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def test_create_bulk_writes_each_instance_with_its_audit_and_interest_rows():
    wf = WorkflowFactory()
    now = timezone.now()
    rows = [
        new_instance(wf, "a", interests=["order:1", "order:2"]),
        new_instance(wf, "b", lane="high"),
    ]
    assert state.create_bulk(rows=rows, now=now, actor="ann") == {rows[0].id, rows[1].id}
    a, b = (TriggerInstance.objects.get(pk=row.id) for row in rows)
    assert (a.status, a.current_node_id, a.available_at) == (TriggerStatus.ENQUEUED, "hello", now)
    assert (b.lane, b.payload) == ("high", PAYLOAD)
    audit = TriggerStatusChange.objects.filter(instance__in=[a, b], actor="ann")
    assert sorted(audit.values_list("from_status", "to_status")) == [("", "enqueued")] * 2
    subjects = Interest.objects.filter(instance=a).values_list("subject", flat=True)
    assert sorted(subjects) == ["order:1", "order:2"]
    assert not Interest.objects.filter(instance=b).exists()


def test_create_bulk_skips_a_taken_key_and_returns_only_what_it_inserted():
    wf = WorkflowFactory()
    now = timezone.now()
    first = new_instance(wf, "a")
    state.create_bulk(rows=[first], now=now, actor="t")
    again, other = new_instance(wf, "a"), new_instance(wf, "b")
    assert state.create_bulk(rows=[again, other], now=now, actor="t") == {other.id}
    assert not TriggerInstance.objects.filter(pk=again.id).exists()
    assert TriggerStatusChange.objects.filter(instance_id=first.id).count() == 1
    assert state.create_bulk(rows=[], now=now, actor="t") == set()


def test_create_or_find_inserts_a_new_key_and_finds_the_holder_of_a_taken_one():
    wf = WorkflowFactory()
    now = timezone.now()
    first = new_instance(wf, "k")
    assert state.create_or_find(row=first, now=now, actor="t", workflow=wf) == (True, None)
    created, existing = state.create_or_find(
        row=new_instance(wf, "k"), now=now, actor="t", workflow=wf
    )
    assert not created and existing is not None
    assert existing.pk == first.id and existing.workflow.key == wf.key
    assert existing.workflow_version_id == wf.current_version_id
    assert TriggerInstance.objects.count() == 1


def test_create_for_recipients_makes_one_instance_per_recipient_not_yet_served():
    wf = WorkflowFactory()
    now = timezone.now()
    for recipient_id in ("a", "b", "c"):
        RecipientFactory(id=recipient_id)

    def create(recipient_ids):
        return state.create_for_recipients(
            workflow_id=wf.pk,
            workflow_version_id=wf.current_version_id,
            idempotency_key="issue",
            payload=dict(PAYLOAD),
            entry_node_id="hello",
            created_by_key="",
            recipient_ids=recipient_ids,
            now=now,
            actor="fanout",
            lane="bulk",
        )

    made = create(["a", "b"])
    assert len(made) == 2 and all(uuid.UUID(i) for i in made)
    rows = TriggerInstance.objects.filter(idempotency_key="issue")
    assert sorted(rows.values_list("recipient_id", "lane")) == [("a", "bulk"), ("b", "bulk")]
    assert sorted(str(i) for i in rows.values_list("id", flat=True)) == sorted(made)
    again = create(["b", "c"])
    assert [TriggerInstance.objects.get(pk=i).recipient_id for i in again] == ["c"]
    assert create([]) == []
    assert TriggerStatusChange.objects.filter(actor="fanout").count() == 3
