"""The batch service: open, join, close, max_items, an idempotent re-arrival,
the digest leaving cancelled members out, a cancelled opener cancelling its batch, and
concurrent joiners against PostgreSQL (one open batch, no lost or double-counted item)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from gates import batches
from gates.models import Batch, BatchItem, BatchStatus
from notifyflow.errors import ConflictError, NotFoundError
from tests.factories import BatchInstanceFactory, BatchWorkflowFactory, RecipientFactory
from triggers import state
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus

S = TriggerStatus
WINDOW = timedelta(minutes=1)


def _arrive(instance, *, key="", max_items=None, now=None):
    return batches.arrive(
        instance_id=instance.pk,
        workflow_id=instance.workflow_id,
        recipient_id=instance.recipient_id,
        node_id="collect",
        key=key,
        window=WINDOW,
        max_items=max_items,
        now=now or timezone.now(),
    )


def _park(instance, until=None):
    """As the engine records a parked batch step."""
    until = until or timezone.now() + timedelta(minutes=5)
    TriggerInstance.objects.filter(pk=instance.pk).update(
        parked_on=ParkedOn.BATCH, available_at=until, wait_deadline=until
    )


@pytest.mark.both_databases
@pytest.mark.django_db
def test_the_first_arrival_opens_and_the_next_ones_join_in_order():
    workflow = BatchWorkflowFactory()
    first, second, third = BatchInstanceFactory.create_batch(3, workflow=workflow)
    opened = _arrive(first)
    assert opened.opener and opened.seq == 1 and opened.status == BatchStatus.OPEN
    assert opened.closes_at == opened.opened_at + WINDOW
    joined = [_arrive(second), _arrive(third)]
    assert [(a.opener, a.seq, a.batch_id) for a in joined] == [
        (False, 2, opened.batch_id),
        (False, 3, opened.batch_id),
    ]
    batch = Batch.objects.get()
    assert (batch.item_count, batch.status, batch.opener_id) == (3, "open", first.pk)
    # Another key is another batch; so is another recipient.
    other = BatchInstanceFactory(workflow=workflow)
    assert _arrive(other, key="thread-2").opener
    person = BatchInstanceFactory(workflow=workflow, recipient=RecipientFactory())
    assert _arrive(person).opener
    assert Batch.objects.filter(status="open").count() == 3


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_re_arrival_after_a_crash_reuses_its_item():
    first, second = BatchInstanceFactory.create_batch(2, workflow=BatchWorkflowFactory())
    _arrive(first)
    again = _arrive(second)
    assert _arrive(second) == again
    assert _arrive(first).opener
    assert Batch.objects.get().item_count == 2
    assert BatchItem.objects.count() == 2


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_re_arrival_after_its_batch_closed_joins_no_newer_batch():
    first, second, third = BatchInstanceFactory.create_batch(3, workflow=BatchWorkflowFactory())
    _arrive(first)
    joined = _arrive(second)
    Batch.objects.update(status=BatchStatus.CLOSED, closed_at=timezone.now())
    newer = _arrive(third)
    assert newer.opener and newer.batch_id != joined.batch_id
    # The crashed member's step runs again: it is still in the first batch only.
    again = _arrive(second)
    assert (again.batch_id, again.seq) == (joined.batch_id, joined.seq)
    assert Batch.objects.get(pk=newer.batch_id).item_count == 1
    assert BatchItem.objects.filter(instance=second).count() == 1


@pytest.mark.both_databases
@pytest.mark.django_db
def test_max_items_closes_the_batch_at_once_and_the_next_arrival_opens_another():
    instances = BatchInstanceFactory.create_batch(4, workflow=BatchWorkflowFactory())
    arrivals = [_arrive(i, max_items=3) for i in instances]
    assert [a.filled for a in arrivals] == [False, False, True, False]
    assert arrivals[2].status == BatchStatus.CLOSED
    assert arrivals[3].opener and arrivals[3].batch_id != arrivals[0].batch_id
    closed = Batch.objects.get(pk=arrivals[0].batch_id)
    assert closed.status == "closed" and closed.closed_at is not None
    assert closed.item_count == 3


@pytest.mark.both_databases
@pytest.mark.django_db
def test_close_completes_parked_members_wakes_the_opener_and_digests(dispatched):
    instances = BatchInstanceFactory.create_batch(4, workflow=BatchWorkflowFactory())
    arrivals = [_arrive(i) for i in instances]
    for instance in instances:
        _park(instance)
    # A member cancelled before the close is left out.
    state.cancel_many(instance_ids=[instances[3].pk], reason="test", actor="test")
    batch = batches.close(batch_id=arrivals[0].batch_id, now=timezone.now(), actor="test")
    assert batch.status == "closed"
    statuses = {i.pk: i.status for i in TriggerInstance.objects.all()}
    assert statuses[instances[0].pk] == S.ENQUEUED  # the opener, woken
    assert [statuses[i.pk] for i in instances[1:]] == [S.COMPLETED, S.COMPLETED, S.CANCELLED]
    opener = TriggerInstance.objects.get(pk=instances[0].pk)
    assert opener.available_at <= timezone.now()
    assert str(opener.pk) in {str(sent) for sent, _ in dispatched}
    digest = batches.digest(batch)
    assert digest["count"] == 3
    assert [item["text"] for item in digest["items"]] == [i.payload["text"] for i in instances[:3]]
    assert digest["first"] == instances[0].payload and digest["last"] == instances[2].payload
    assert digest["batch_id"] == str(batch.pk) and digest["closed_at"]
    # Idempotent.
    assert batches.close(batch_id=batch.pk, now=timezone.now(), actor="test").status == "closed"


@pytest.mark.both_databases
@pytest.mark.django_db
def test_flush_closes_an_open_batch_and_refuses_a_closed_one(dispatched):
    first = BatchInstanceFactory()
    arrival = _arrive(first)
    assert batches.flush(batch_id=arrival.batch_id, actor="op").status == "closed"
    with pytest.raises(ConflictError) as error:
        batches.flush(batch_id=arrival.batch_id, actor="op")
    assert error.value.code == "not_open" and "closed" in str(error.value.message)
    with pytest.raises(NotFoundError):
        batches.flush(batch_id=first.pk, actor="op")


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_cancelled_opener_cancels_its_batch_and_its_parked_members(dispatched):
    instances = BatchInstanceFactory.create_batch(3, workflow=BatchWorkflowFactory())
    arrival = [_arrive(i) for i in instances][0]
    for instance in instances:
        _park(instance)
    state.cancel(instance_id=instances[0].pk, from_status=S.ENQUEUED, reason="test", actor="test")
    batch = Batch.objects.get(pk=arrival.batch_id)
    assert batch.status == BatchStatus.CANCELLED and batch.closed_at is not None
    assert set(TriggerInstance.objects.values_list("status", flat=True)) == {S.CANCELLED}
    reasons = TriggerInstance.objects.get(pk=instances[1].pk).status_changes.latest("id").reason
    assert reasons == f"batch {batch.pk} cancelled: its opener was cancelled"


@pytest.mark.both_databases
@pytest.mark.django_db
def test_the_digest_shows_the_first_hundred_items_and_counts_them_all():
    instances = BatchInstanceFactory.create_batch(103, workflow=BatchWorkflowFactory())
    arrivals = [_arrive(i) for i in instances]
    batch = batches.close(batch_id=arrivals[0].batch_id, now=timezone.now(), actor="t")
    digest = batches.digest(batch)
    assert digest["count"] == 103 and len(digest["items"]) == 100
    assert digest["last"] == instances[-1].payload


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_arrivals_make_one_batch_with_every_item_once():
    n = 24
    instances = BatchInstanceFactory.create_batch(n, workflow=BatchWorkflowFactory())
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def arrive(instance):
        try:
            barrier.wait()
            _arrive(instance, key="same")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=arrive, args=(i,)) for i in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    batch = Batch.objects.get()
    assert batch.status == "open" and batch.item_count == n
    seqs = sorted(BatchItem.objects.filter(batch=batch).values_list("seq", flat=True))
    assert seqs == list(range(1, n + 1))
    assert BatchItem.objects.values("instance").distinct().count() == n


@pytest.mark.both_databases
@pytest.mark.django_db
def test_close_due_closes_every_due_open_batch_of_the_node_at_once():
    workflow = BatchWorkflowFactory()
    now = timezone.now()
    due = [
        _arrive(BatchInstanceFactory(workflow=workflow, recipient=RecipientFactory()))
        for _ in range(3)
    ]
    later = _arrive(BatchInstanceFactory(workflow=workflow, recipient=RecipientFactory()))
    other_node = BatchInstanceFactory(workflow=workflow, recipient=RecipientFactory())
    other = batches.arrive(
        instance_id=other_node.pk,
        workflow_id=workflow.pk,
        recipient_id=other_node.recipient_id,
        node_id="elsewhere",
        key="",
        window=WINDOW,
        max_items=None,
        now=now,
    )
    Batch.objects.exclude(pk=later.batch_id).update(closes_at=now)
    closed = batches.close_due(workflow_id=workflow.pk, node_id="collect", now=now, actor="engine")
    assert closed == 3
    statuses = dict(Batch.objects.values_list("pk", "status"))
    assert {statuses[a.batch_id] for a in due} == {BatchStatus.CLOSED}
    assert statuses[later.batch_id] == statuses[other.batch_id] == BatchStatus.OPEN
    assert batches.close_due(workflow_id=workflow.pk, node_id="collect", now=now, actor="x") == 0
