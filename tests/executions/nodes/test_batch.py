"""The batch node through the engine: the opener parks, members join
(skipped ``batched``, parked in the batch), and at the window's end (or a flush) the
members complete and the opener continues with the digest in vars."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.utils import timezone

from executions import engine, sweeper
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from executions.selectors import instance_timeline
from gates import batches
from gates.models import Batch
from tests.factories import (
    PAYLOAD,
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
    batch_definition,
)
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import instance_run_now, trigger_create

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _create(workflow, n):
    return [
        trigger_create(
            workflow=workflow, idempotency_key=f"c{i}", payload={**PAYLOAD, "text": f"c{i}"}
        ).instance
        for i in range(n)
    ]


def _fresh(instance):
    return TriggerInstance.objects.get(pk=instance.pk)


def _arrive_all(instances):
    return [engine.step_execute(instance_id=i.pk) for i in instances]


def test_members_join_and_the_opener_continues_with_the_digest(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1m"))
    opener, *members = _create(workflow, 3)
    assert _arrive_all([opener, *members]) == [StepOutcome.WAITING] * 3
    parked = _fresh(opener)
    assert (parked.status, parked.parked_on, parked.current_node_id) == (
        S.ENQUEUED,
        "batch",
        "collect",
    )
    assert parked.wait_deadline is not None and parked.wait_deadline > timezone.now()
    member = _fresh(members[0])
    assert member.parked_on == "batch" and member.vars["batch_collect"]["joined"] is True
    log = StepExecutionLog.objects.get(trigger_id=member.pk)
    assert log.skip_reason == "batched" and log.success
    timeline = instance_timeline(instance_id=opener.pk)
    assert timeline.pending.waiting_for["kind"] == "batch"
    # The window ends.
    now = timezone.now()
    Batch.objects.update(closes_at=now)
    TriggerInstance.objects.filter(pk=opener.pk).update(available_at=now, wait_deadline=now)
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED
    for m in members:
        assert _fresh(m).status == S.COMPLETED
    digest = _fresh(opener).vars["batch_collect"]
    assert digest["count"] == 3 and [i["text"] for i in digest["items"]] == ["c0", "c1", "c2"]
    assert digest["first"]["text"] == "c0" and digest["last"]["text"] == "c2"
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.COMPLETED
    assert [m.subject for m in mail.outbox] == ["3 new comments"]


def test_a_flush_wakes_the_opener_at_once(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1h"))
    opener, member = _create(workflow, 2)
    _arrive_all([opener, member])
    batches.flush(batch_id=Batch.objects.get().pk, actor="op")
    assert _fresh(member).status == S.COMPLETED
    assert _fresh(opener).available_at <= timezone.now()
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED
    assert _fresh(opener).vars["batch_collect"]["count"] == 2


def test_max_items_the_filler_closes_and_ends(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1h", max_items=2))
    opener, filler = _create(workflow, 2)
    assert _arrive_all([opener, filler]) == [StepOutcome.WAITING, StepOutcome.COMPLETED]
    assert _fresh(filler).vars["batch_collect"] == {
        "batch_id": str(Batch.objects.get().pk),
        "joined": True,
    }
    assert _fresh(opener).available_at <= timezone.now()
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED


def test_run_now_on_the_opener_closes_the_batch(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1h"))
    opener, member = _create(workflow, 2)
    _arrive_all([opener, member])
    instance_run_now(instance_id=opener.pk, actor="op")
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED
    assert Batch.objects.get().status == "closed"
    assert _fresh(member).status == S.COMPLETED


def test_an_early_wake_parks_again_and_a_member_woken_after_the_close_ends(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1h"))
    opener, member = _create(workflow, 2)
    _arrive_all([opener, member])
    TriggerInstance.objects.filter(pk=opener.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.WAITING
    assert Batch.objects.get().status == "open"
    # The member's step was still running when the batch closed: it wakes later and ends.
    Batch.objects.update(status="closed", closed_at=timezone.now())
    TriggerInstance.objects.filter(pk=member.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=member.pk) == StepOutcome.COMPLETED
    assert StepExecutionLog.objects.filter(trigger_id=member.pk).last().skip_reason == "batched"


def test_the_key_splits_batches():
    workflow = WorkflowFactory(definition=batch_definition(key="{{ payload.text }}"))
    _arrive_all(_create(workflow, 2))
    assert Batch.objects.count() == 2
    assert sorted(Batch.objects.values_list("key", flat=True)) == ["c0", "c1"]
    assert timedelta(minutes=1) == Batch.objects.first().closes_at - Batch.objects.first().opened_at


def test_a_batch_closed_while_an_arrival_was_recorded_still_settles_it(dispatched, monkeypatch):
    workflow = WorkflowFactory(definition=batch_definition(window="1h"))
    opener, member = _create(workflow, 2)
    engine.step_execute(instance_id=opener.pk)
    arrive = batches.arrive

    def arrive_then_flushed(**kwargs):
        arrival = arrive(**kwargs)
        # A flush lands after the member joined, before its park is recorded.
        batches.flush(batch_id=arrival.batch_id, actor="op")
        return arrival

    monkeypatch.setattr(batches, "arrive", arrive_then_flushed)
    assert engine.step_execute(instance_id=member.pk) == StepOutcome.WAITING
    # Completed as soon as its park committed, not at the window's end.
    assert _fresh(member).status == S.COMPLETED
    assert _fresh(opener).available_at <= timezone.now()


def test_a_member_woken_early_parks_again_and_is_counted_batched_once(dispatched):
    workflow = WorkflowFactory(definition=batch_definition(window="1h"))
    opener, member = _create(workflow, 2)
    _arrive_all([opener, member])
    TriggerInstance.objects.filter(pk=member.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=member.pk) == StepOutcome.WAITING
    assert _fresh(member).parked_on == "batch"
    logs = StepExecutionLog.objects.filter(trigger_id=member.pk)
    assert logs.count() == 2 and logs.filter(skip_reason="batched").count() == 1


# --- scheduled digests (``schedule`` instead of ``window``) ---------------------------

WEEKDAYS_0900 = {"cron": "0 9 * * 1-5"}
ZONES = ("Europe/Paris", "America/New_York", "Asia/Tokyo")


@pytest.fixture
def clock(monkeypatch):
    """The time every ``timezone.now()`` reads (engine, sweeper, gates), set by the test."""
    at = {"now": timezone.now()}
    monkeypatch.setattr(timezone, "now", lambda: at["now"])
    return at


def _due_now(clock, **fields):
    """An instance due at the test's clock (the factory's default reads the real one)."""
    return TriggerInstanceFactory(available_at=clock["now"], **fields)


def _monday_0900(zone, friday):
    return datetime.combine(friday + timedelta(days=3), time(9), tzinfo=ZoneInfo(zone))


@pytest.mark.parametrize(
    "friday",
    # The Fridays before the US (8 March 2026) and the EU (29 March) spring-forward.
    [date(2026, 3, 6), date(2026, 3, 27)],
)
def test_a_0900_weekday_digest_closes_at_each_recipients_0900_across_a_dst_change(
    dispatched, clock, friday
):
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=WEEKDAYS_0900))
    clock["now"] = datetime.combine(friday, time(15), tzinfo=UTC)
    people = {zone: RecipientFactory(timezone=zone) for zone in ZONES}
    arrivals = {
        zone: [
            _due_now(clock, workflow=workflow, recipient=person, payload={**PAYLOAD, "text": i})
            for i in range(2)
        ]
        for zone, person in people.items()
    }
    for opener, member in arrivals.values():
        assert _arrive_all([opener, member]) == [StepOutcome.WAITING] * 2
    closes = {b.recipient_id: b.closes_at for b in Batch.objects.all()}
    for zone, person in people.items():
        assert closes[person.pk] == _monday_0900(zone, friday)
        assert closes[person.pk].astimezone(ZoneInfo(zone)).hour == 9
    # The clock moves to each close in turn. The opener is held in the database until
    # its close is a minute away: the sweeper hands it to the broker then, to fire at it.
    for zone in sorted(ZONES, key=lambda z: closes[people[z].pk]):
        opener, member = arrivals[zone]
        due = closes[people[zone].pk]
        assert str(opener.pk) not in {str(instance_id) for instance_id, _ in dispatched}
        clock["now"] = due - timedelta(minutes=1)
        sweeper.sweep()
        assert (str(opener.pk), 60.0) in [(str(i), countdown) for i, countdown in dispatched]
        clock["now"] = due
        assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED
        batch = Batch.objects.get(recipient=people[zone])
        assert (batch.status, batch.closed_at) == ("closed", due)
        assert _fresh(member).status == S.COMPLETED
        assert engine.step_execute(instance_id=opener.pk) == StepOutcome.COMPLETED
    assert sorted(m.subject for m in mail.outbox) == ["2 new comments"] * 3


def test_the_first_opener_due_closes_the_nodes_other_due_batches_with_its_own(dispatched, clock):
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=WEEKDAYS_0900))
    clock["now"] = datetime(2026, 6, 5, 15, tzinfo=UTC)
    first, second = (
        _due_now(clock, workflow=workflow, recipient=RecipientFactory(timezone="Europe/Paris"))
        for _ in range(2)
    )
    _arrive_all([first, second])
    clock["now"] = _monday_0900("Europe/Paris", date(2026, 6, 5))
    assert engine.step_execute(instance_id=first.pk) == StepOutcome.ADVANCED
    assert set(Batch.objects.values_list("status", "closed_at")) == {("closed", clock["now"])}
    # The second opener still continues with its own digest when its step runs.
    clock["now"] += timedelta(seconds=2)
    assert engine.step_execute(instance_id=second.pk) == StepOutcome.ADVANCED
    assert _fresh(second).vars["batch_collect"]["count"] == 1


def test_a_schedule_timezone_overrides_the_recipients(dispatched, clock):
    schedule = {**WEEKDAYS_0900, "timezone": "America/New_York"}
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=schedule))
    clock["now"] = datetime(2026, 6, 5, 15, tzinfo=UTC)  # a Friday
    opener = _due_now(clock, workflow=workflow, recipient=RecipientFactory())
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.WAITING
    assert Batch.objects.get().closes_at == _monday_0900("America/New_York", date(2026, 6, 5))


def test_a_recipient_without_a_timezone_and_no_recipient_use_utc(dispatched, clock):
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=WEEKDAYS_0900))
    clock["now"] = datetime(2026, 6, 5, 15, tzinfo=UTC)
    _due_now(clock, workflow=workflow, recipient=RecipientFactory(timezone=None))
    _due_now(clock, workflow=workflow)
    _arrive_all(TriggerInstance.objects.filter(workflow=workflow))
    assert [b.closes_at for b in Batch.objects.all()] == [_monday_0900("UTC", date(2026, 6, 5))] * 2


def test_a_scheduled_batch_is_flushed_like_the_others(dispatched, clock):
    workflow = WorkflowFactory(definition=batch_definition(window=None, schedule=WEEKDAYS_0900))
    clock["now"] = datetime(2026, 6, 5, 15, tzinfo=UTC)
    opener, member = _create(workflow, 2)
    _arrive_all([opener, member])
    batches.flush(batch_id=Batch.objects.get().pk, actor="op")
    assert _fresh(member).status == S.COMPLETED
    assert engine.step_execute(instance_id=opener.pk) == StepOutcome.ADVANCED
    assert _fresh(opener).vars["batch_collect"]["count"] == 2
