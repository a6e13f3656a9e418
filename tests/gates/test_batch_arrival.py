"""A batch's close is reported (``batch.closed``) in the transaction that closes it -
at the window's end, by a flush, or by the arrival that reaches ``max_items`` - exactly
once; its members report their skip (``batched``) when they join and their completion
(set-based) when it closes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from executions import engine
from gates import batches
from gates.models import Batch
from tests.factories import BatchInstanceFactory, BatchWorkflowFactory, RecipientFactory
from tests.webhook_events import kicks, sent_to, subscribe, types_in_order
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import instance_cancel

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.django_db,
    pytest.mark.usefixtures("kicks", "dispatched"),
]
__all__ = ["kicks"]


def test_a_flushed_batch_reports_its_close_its_members_and_its_digest():
    endpoint = subscribe("batch.closed", "step.skipped", "instance.completed", "delivery.sent")
    person = RecipientFactory(id="ada")
    workflow = BatchWorkflowFactory()
    opener, *members = BatchInstanceFactory.create_batch(3, workflow=workflow, recipient=person)
    for instance in (opener, *members):
        engine.step_execute(instance_id=instance.pk)
    for member in members:
        assert types_in_order(endpoint, member.pk) == [(1, "step.skipped")]
        assert sent_to(endpoint, instance_id=member.pk)[0].data["reason"] == "batched"
    batch = Batch.objects.get()
    batches.flush(batch_id=batch.pk, actor="ops")
    batches.close(batch_id=batch.pk, now=timezone.now(), actor="ops")  # closes nothing more
    (closed,) = sent_to(endpoint, type="batch.closed")
    batch.refresh_from_db()
    assert closed.data == {
        "batch_id": str(batch.pk),
        "workflow": workflow.key,
        "node_id": "collect",
        "recipient": "ada",
        "count": 3,
        "opened_at": batch.opened_at.isoformat(),
        "closed_at": batch.closed_at.isoformat(),
    }
    assert closed.instance_id is None and closed.workflow_key == workflow.key
    for member in members:
        assert types_in_order(endpoint, member.pk) == [
            (1, "step.skipped"),
            (2, "instance.completed"),
        ]
        completed = sent_to(endpoint, instance_id=member.pk)[1]
        assert completed.data["reason"] == f"batched into batch {batch.pk}"
    # The opener continues with the digest.
    engine.step_execute(instance_id=opener.pk)
    TriggerInstance.objects.filter(pk=opener.pk).update(available_at=timezone.now())
    engine.step_execute(instance_id=opener.pk)
    assert TriggerInstance.objects.get(pk=opener.pk).status == TriggerStatus.COMPLETED
    assert types_in_order(endpoint, opener.pk) == [(1, "delivery.sent"), (2, "instance.completed")]


def test_the_arrival_that_fills_the_batch_reports_its_close_once():
    endpoint = subscribe("batch.closed")
    workflow = BatchWorkflowFactory()
    instances = BatchInstanceFactory.create_batch(4, workflow=workflow)
    now = timezone.now()
    arrivals = [
        batches.arrive(
            instance_id=instance.pk,
            workflow_id=workflow.pk,
            recipient_id=None,
            node_id="collect",
            key="",
            window=timedelta(minutes=1),
            max_items=3,
            now=now,
        )
        for instance in instances
    ]
    assert [a.filled for a in arrivals] == [False, False, True, False]
    (closed,) = sent_to(endpoint)
    assert (closed.data["batch_id"], closed.data["count"]) == (str(arrivals[0].batch_id), 3)
    # The filler's close duties close nothing more.
    batches.close(batch_id=arrivals[0].batch_id, now=timezone.now(), actor="engine")
    assert len(sent_to(endpoint)) == 1


def test_a_close_whose_transaction_rolls_back_reports_nothing():
    endpoint = subscribe("batch.closed")
    opener = BatchInstanceFactory()
    engine.step_execute(instance_id=opener.pk)
    batch = Batch.objects.get()
    with pytest.raises(RuntimeError), transaction.atomic():
        batches.close(batch_id=batch.pk, now=timezone.now(), actor="ops")
        raise RuntimeError("the caller failed")
    assert not sent_to(endpoint)
    assert Batch.objects.get().status == "open"


def test_a_batch_cancelled_with_its_opener_reports_no_close():
    endpoint = subscribe("batch.closed", "instance.cancelled")
    workflow = BatchWorkflowFactory()
    opener, member = BatchInstanceFactory.create_batch(2, workflow=workflow)
    for instance in (opener, member):
        engine.step_execute(instance_id=instance.pk)
    instance_cancel(instance_id=opener.pk, actor="ops")
    assert not sent_to(endpoint, type="batch.closed")
    assert {m.instance_id for m in sent_to(endpoint, type="instance.cancelled")} == {
        opener.pk,
        member.pk,
    }
