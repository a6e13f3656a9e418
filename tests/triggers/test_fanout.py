"""The list fan-out job (triggers.fanout), in process: membership read once, ids
deduplicated across lists and minus the request's own entries, set-based batches with
their progress, resume after a lost lease, cancel stops it; the lane of what it creates."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recipients.models import ListMembership, Recipient, RecipientList
from tests.factories import PAYLOAD, WorkflowFactory
from tests.worker import wait_until
from triggers import fanout
from triggers.dispatch import BackgroundDispatch, lane_queue
from triggers.fanout import fanout_lane
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut
from triggers.services import RecipientEntry, instance_cancel_by_key, trigger_create_for_recipients

pytestmark = pytest.mark.django_db


def members(key: str, ids: list[str]) -> RecipientList:
    group = RecipientList.objects.create(key=key)
    Recipient.objects.bulk_create([Recipient(id=rid) for rid in ids], ignore_conflicts=True)
    ListMembership.objects.bulk_create(
        [ListMembership(list=group, recipient_id=rid) for rid in ids]
    )
    return group


def start(*entries: RecipientEntry, key: str = "k") -> FanOut:
    result = trigger_create_for_recipients(
        workflow="welcome", idempotency_key=key, payload=PAYLOAD, recipients=list(entries)
    )
    assert result.fanout is not None
    return result.fanout


@pytest.fixture
def welcome(db):
    return WorkflowFactory(key="welcome")


def instances(key: str = "k") -> list[str]:
    return sorted(
        TriggerInstance.objects.filter(idempotency_key=key).values_list("recipient_id", flat=True)
    )


def while_writing_each_batch(monkeypatch, then: Callable[[int], None]) -> None:
    """Call ``then(n)`` while the job writes its n-th batch (1, 2, ...), inside that
    batch's transaction: when the batch hands its instances to the dispatch (the
    broker's side of the job). ``then`` raising is a worker dying before that batch
    commits; ``then`` cancelling is an operator acting while the job runs."""
    written: list[int] = []

    class Watched(BackgroundDispatch):
        def on_commit(self, instance_ids: Iterable) -> None:
            super().on_commit(instance_ids)
            written.append(1)
            then(len(written))

    monkeypatch.setattr("triggers.fanout.BackgroundDispatch", Watched)


class Killed(Exception):
    """The worker running the job died."""


def killed_while_writing_batch(monkeypatch, number: int) -> None:
    """The job dies while writing its batch ``number`` (counted across runs): the ones
    before it committed, its lease is still held; later batches run normally."""

    def then(n: int) -> None:
        if n == number:
            raise Killed

    while_writing_each_batch(monkeypatch, then)


def test_members_of_every_list_once_minus_the_requests_own_entries(welcome):
    members("a", [f"m{n:02}" for n in range(10)])
    members("b", [f"m{n:02}" for n in range(5, 15)])
    job = start(
        RecipientEntry(id="m03"), RecipientEntry(list_key="a"), RecipientEntry(list_key="b")
    )
    assert job.expected == 14
    assert fanout.fanout_run(fanout_id=job.pk, batch=4) == "done"
    assert instances() == [f"m{n:02}" for n in range(15)]  # m03 by the request itself
    job.refresh_from_db()
    assert (job.status, job.expected, job.created, job.duplicates, job.position) == (
        "done",
        14,
        14,
        0,
        14,
    )
    assert job.locked_until is None and job.finished_at is not None


@pytest.mark.postgres  # elsewhere the ORM store inserts row by row, in one transaction
def test_instances_go_in_one_statement_per_batch(welcome):
    members("a", [f"m{n:03}" for n in range(100)])
    job = start(RecipientEntry(list_key="a"))
    with CaptureQueriesContext(connection) as queries:
        fanout.fanout_run(fanout_id=job.pk, batch=50)
    inserts = [q for q in queries if 'INSERT INTO "triggers_triggerinstance"' in q["sql"]]
    assert len(inserts) == 2
    assert len(queries) < 30


def test_membership_is_read_once_when_the_job_starts(welcome, settings):
    group = members("a", ["m1", "m2"])
    job = start(RecipientEntry(list_key="a"))
    settings.NOTIFYFLOW_FANOUT_SLICE_S = 0  # snapshot, then hand the rest on
    assert fanout.fanout_run(fanout_id=job.pk) == "continued"
    ListMembership.objects.create(list=group, recipient=Recipient.objects.create(id="late"))
    settings.NOTIFYFLOW_FANOUT_SLICE_S = 20
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    assert instances() == ["m1", "m2"]


def test_a_live_lease_keeps_a_second_run_out(welcome):
    members("a", ["m1"])
    job = start(RecipientEntry(list_key="a"))
    FanOut.objects.filter(pk=job.pk).update(locked_until=timezone.now() + timedelta(minutes=1))
    assert fanout.fanout_run(fanout_id=job.pk) == "busy"
    assert instances() == []


def test_an_expired_lease_is_resumed_and_nothing_is_created_twice(welcome, monkeypatch):
    members("a", [f"m{n}" for n in range(10)])
    job = start(RecipientEntry(list_key="a"))
    # A worker died after its first batch committed: position 4, its lease run out.
    killed_while_writing_batch(monkeypatch, 2)
    with pytest.raises(Killed):
        fanout.fanout_run(fanout_id=job.pk, batch=4)
    assert len(instances()) == 4
    assert fanout.fanouts_expired(now=timezone.now(), batch=10) == 0  # lease still live
    later = timezone.now() + timedelta(seconds=120)
    assert fanout.fanouts_expired(now=later, batch=10) == 1
    # Sent once per lease period, not once per sweep.
    assert fanout.fanouts_expired(now=later + timedelta(seconds=5), batch=10) == 0
    assert fanout.fanout_run(fanout_id=job.pk, batch=4) == "done"
    assert instances() == sorted(f"m{n}" for n in range(10))
    job.refresh_from_db()
    assert (job.created, job.duplicates) == (10, 0)


def test_members_that_already_have_an_instance_count_as_duplicates(welcome):
    members("a", ["m1", "m2", "m3"])
    trigger_create_for_recipients(
        workflow="welcome",
        idempotency_key="k",
        payload=PAYLOAD,
        recipients=[RecipientEntry(id="m2")],
    )
    job = start(RecipientEntry(list_key="a"))
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    job.refresh_from_db()
    assert (job.expected, job.created, job.duplicates) == (3, 2, 1)
    assert instances() == ["m1", "m2", "m3"]


def test_cancel_by_key_stops_the_job_and_cancels_what_it_created(welcome, monkeypatch):
    members("a", [f"m{n}" for n in range(10)])
    job = start(RecipientEntry(id="direct"), RecipientEntry(list_key="a"))
    cancelled = []

    def cancel_in_the_first(n: int) -> None:
        if n == 1:
            cancelled.append(
                instance_cancel_by_key(workflow="welcome", idempotency_key="k", actor="t")
            )

    while_writing_each_batch(monkeypatch, cancel_in_the_first)
    assert fanout.fanout_run(fanout_id=job.pk, batch=3) == "cancelled"
    result = cancelled[0]
    assert result.cancelled == 4 and result.fanout.status == "cancelled"
    assert len(instances()) == 4  # the direct one and the first batch
    assert set(TriggerInstance.objects.values_list("status", flat=True)) == {"cancelled"}
    job.refresh_from_db()
    assert (job.status, job.created) == ("cancelled", 3)
    assert fanout.fanout_run(fanout_id=job.pk) == "busy"


def test_an_empty_list_finishes_at_once(welcome):
    RecipientList.objects.create(key="empty")
    job = start(RecipientEntry(list_key="empty"))
    assert job.expected == 0
    assert fanout.fanout_run(fanout_id=job.pk) == "done"


def test_cancel_by_key_cancels_running_and_waiting_instances_with_their_audit_rows(welcome):
    from triggers import state
    from triggers.models import TriggerStatusChange

    result = trigger_create_for_recipients(
        workflow="welcome",
        idempotency_key="k",
        payload=PAYLOAD,
        recipients=[RecipientEntry(id="a"), RecipientEntry(id="b"), RecipientEntry(id="c")],
    )
    running = result.instances[0].id
    assert state.claim(instance_id=running, worker="w", now=timezone.now()) is not None
    TriggerInstance.objects.filter(pk=result.instances[2].id).update(
        status="completed", current_node_id=None, finished_at=timezone.now()
    )
    outcome = instance_cancel_by_key(
        workflow="welcome", idempotency_key="k", actor="op", reason="x"
    )
    assert (outcome.cancelled, outcome.already_finished) == (2, 1)
    row = TriggerInstance.objects.get(pk=running)
    assert (row.status, row.lease_token, row.locked_until) == ("cancelled", None, None)
    audit = TriggerStatusChange.objects.filter(to_status="cancelled").order_by("from_status")
    assert [(a.from_status, a.reason, a.actor) for a in audit] == [
        ("enqueued", "x", "op"),
        ("processing", "x", "op"),
    ]


def test_a_batch_makes_uuid7_ids_with_their_creation_audit_rows(welcome):
    from triggers.models import TriggerStatusChange

    members("a", ["m1", "m2", "m3"])
    job = start(RecipientEntry(list_key="a"))
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    created = TriggerInstance.objects.filter(idempotency_key="k")
    assert {row.id.version for row in created} == {7}
    assert len({row.id for row in created}) == 3
    audit = TriggerStatusChange.objects.filter(instance__in=created)
    assert (
        sorted((a.from_status, a.to_status, a.reason) for a in audit)
        == [("", "enqueued", "created")] * 3
    )


def test_a_workflow_with_interests_gets_each_instances_interest_rows(db):
    from tests.factories import wait_definition
    from triggers.models.inbox import Interest

    WorkflowFactory(key="welcome", definition=wait_definition(interests=["k:{{ trigger.id }}"]))
    members("a", ["m1", "m2"])
    job = start(RecipientEntry(list_key="a"))
    assert fanout.fanout_run(fanout_id=job.pk) == "done"
    subjects = set(Interest.objects.values_list("instance_id", "subject"))
    ids = TriggerInstance.objects.filter(idempotency_key="k").values_list("id", flat=True)
    assert subjects == {(i, f"k:{i}") for i in ids}


@pytest.mark.parametrize(
    ("priority", "lane"),
    [("normal", "bulk"), ("critical", "critical"), ("high", "high"), ("bulk", "bulk")],
)
def test_a_list_fan_out_of_a_normal_workflow_runs_in_bulk_others_keep_theirs(
    monkeypatch, django_capture_on_commit_callbacks, priority, lane
):
    sent: list[tuple[str, str | None]] = []
    monkeypatch.setattr(
        "triggers.dispatch.send_tasks",
        lambda name, messages, context, queue=None: sent.extend((m, queue) for (m,) in messages),
    )
    WorkflowFactory(key="news", priority=priority)
    members("all", [f"m{n}" for n in range(5)])
    result = trigger_create_for_recipients(
        workflow="news",
        idempotency_key="k",
        payload=PAYLOAD,
        recipients=[RecipientEntry(id="direct"), RecipientEntry(list_key="all")],
    )
    assert result.fanout is not None
    with django_capture_on_commit_callbacks(execute=True):
        assert fanout.fanout_run(fanout_id=result.fanout.pk, batch=2) == "done"
    # The captured commit callbacks ran after fanout_run had closed its dispatch, so the
    # publishing thread is not joined: wait for what it sends.
    wait_until(lambda: len(sent) >= 5, timeout=10, interval=0.01, what="5 messages")
    assert fanout_lane(priority) == lane
    created = dict(TriggerInstance.objects.values_list("recipient_id", "lane"))
    # The request's own recipient runs in the workflow's lane, the list's in the fan-out's.
    assert created.pop("direct") == priority
    assert created == {f"m{n}": lane for n in range(5)}
    listed = set(
        TriggerInstance.objects.exclude(recipient_id="direct").values_list("id", flat=True)
    )
    assert sorted(str(i) for i in listed) == sorted(m for m, _ in sent)
    assert {queue for _, queue in sent} == {lane_queue(lane)}
