"""One message to several targets under one delivery (``executions.target_sends``), with
the targets' provider answered by the test's own ``send`` (the nodes' tests drive the
real clients against the fakes): an accepted target is recorded while the others'
answers are awaited, so a crash mid-send resends to none that accepted; a retry sends
only to the targets with no final result; what the attempt ends as."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection
from django.utils import timezone

from executions import target_sends
from executions.deliveries import record_delivery
from executions.models import Delivery, DeliveryStatus
from executions.providers.base import ProviderError
from executions.providers.targets import TargetOutcome, TargetResult
from executions.step import DeliveryState, StepContext
from executions.target_sends import AllTargetsDead, Target, send_to_targets
from tests.factories import TriggerInstanceFactory
from triggers.models import TriggerInstance

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
TARGETS = [Target(id=name, provider="fcm", label=f"…{name}") for name in ("a", "b", "c")]
A = TargetOutcome


def step_of(instance: TriggerInstance) -> StepContext:
    """The node ``push`` of ``instance`` as a step finds it: its delivery as it reads."""
    row = Delivery.objects.filter(instance_id=instance.pk, node_id="push").first()
    return StepContext(
        instance=instance,
        node_id="push",
        node_type="push",
        config={},
        context={},
        now=timezone.now(),
        delivery=DeliveryState(row.status if row else None, row.output if row else None),
    )


def answering(
    outcomes: dict[str, TargetOutcome], calls: list[str], **retry_after: float
) -> Callable[[Target], TargetResult]:
    def send(target: Target) -> TargetResult:
        calls.append(target.id)
        outcome = outcomes.get(target.id, A.ACCEPTED)
        return TargetResult(
            outcome,
            target.provider,
            provider_message_id=f"msg-{target.id}" if outcome == A.ACCEPTED else "",
            code="" if outcome == A.ACCEPTED else "CODE",
            retry_after_s=retry_after.get(target.id),
        )

    return send


def send(step: StepContext, send_one, targets=TARGETS, removed: list[str] | None = None):
    def remove_dead(target: Target, result: TargetResult) -> bool:
        if removed is not None:
            removed.append(target.id)
        return True

    return send_to_targets(
        step=step,
        channel="push",
        targets=targets,
        send=send_one,
        remove_dead=remove_dead,
        noun="device",
    )


def recorded(instance: TriggerInstance) -> Delivery:
    return Delivery.objects.get(instance_id=instance.pk, node_id="push")


def reads_without_table_locks() -> None:
    """The tests' SQLite database is in memory with a shared cache, where a reader in
    another thread holds a table lock that fails a write at once ("database table is
    locked") instead of waiting; an uncommitted-read connection takes none. The step
    writes in autocommit, so what it reads was committed all the same; PostgreSQL
    needs nothing."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")


@pytest.mark.django_db(transaction=True)
def test_accepted_targets_are_recorded_while_another_answer_is_awaited():
    instance = TriggerInstanceFactory()
    seen: list[dict] = []

    def b_answers_once_the_others_are_recorded(target: Target) -> TargetResult:
        if target.id == "b":  # in a send thread, with its own database connection
            try:
                reads_without_table_locks()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    found = Delivery.objects.filter(instance_id=instance.pk).first()
                    row = (found.targets if found else None) or {}
                    if {"a", "c"} <= set(row):
                        break
                    time.sleep(0.02)
                seen.append(row)
            finally:
                connection.close()
        return TargetResult(A.ACCEPTED, "fcm", provider_message_id=f"msg-{target.id}")

    step = step_of(instance)
    output = send(step, b_answers_once_the_others_are_recorded)
    (row,) = seen
    assert {key: r["outcome"] for key, r in row.items()} == {"a": "accepted", "c": "accepted"}
    assert row["a"]["message_id"] == "msg-a" and row["a"]["target"] == "…a"
    assert (output["devices"], output["accepted"]) == (3, 3)
    # The last answer goes with the step's outcome.
    record_delivery(step)
    final = recorded(instance)
    assert final.status == DeliveryStatus.SENT
    assert {key: r["outcome"] for key, r in final.targets.items()} == dict.fromkeys(
        "abc", "accepted"
    )


def test_a_crash_mid_send_resends_to_no_target_that_had_accepted():
    instance = TriggerInstanceFactory()

    def dies_at_b(target: Target) -> TargetResult:
        if target.id == "b":
            raise RuntimeError("a bug in the provider call")
        return TargetResult(A.ACCEPTED, "fcm")

    with pytest.raises(RuntimeError):
        send(step_of(instance), dies_at_b)
    # The others' answers came, and were recorded before the error was raised.
    row = recorded(instance)
    assert row.status == DeliveryStatus.SENDING
    assert {key: r["outcome"] for key, r in row.targets.items()} == dict.fromkeys("ac", "accepted")
    calls: list[str] = []
    instance.attempts = 1  # the lease's recovery counted the crashed attempt
    step = step_of(instance)
    send(step, answering({}, calls))
    assert calls == ["b"]
    assert step.delivery.attempt == 2


def test_the_first_target_is_sent_in_the_steps_thread_the_others_at_once_beside_it():
    threads: dict[str, str] = {}

    def note_thread(target: Target) -> TargetResult:
        threads[target.id] = threading.current_thread().name
        return TargetResult(A.ACCEPTED, "fcm")

    send(step_of(TriggerInstanceFactory()), note_thread)
    assert threads["a"] == threading.current_thread().name
    assert threads["b"].startswith("notifyflow-send") and threads["c"].startswith("notifyflow")


def test_a_retry_sends_only_to_targets_without_a_final_result():
    instance = TriggerInstanceFactory()
    calls: list[str] = []
    step = step_of(instance)
    outcomes = {"a": A.FAILED, "b": A.RETRY, "c": A.DEAD}
    with pytest.raises(ProviderError) as failed:
        send(step, answering(outcomes, calls, b=30))
    assert not failed.value.permanent and failed.value.retry_after_s == 30
    record_delivery(step)
    again = step_of(instance)
    output = send(again, answering({}, calls))
    assert sorted(calls[:3]) == ["a", "b", "c"] and calls[3:] == ["b"]
    assert (output["accepted"], output["failed"], output["removed"]) == (1, 1, 1)


def test_the_retry_waits_for_the_longest_retry_after_asked():
    calls: list[str] = []
    outcomes = dict.fromkeys("abc", A.RETRY)
    with pytest.raises(ProviderError) as failed:
        send(step_of(TriggerInstanceFactory()), answering(outcomes, calls, a=5, c=120))
    assert failed.value.retry_after_s == 120
    assert "3 of 3 devices to retry (fcm CODE); 0 accepted" in str(failed.value)


def test_no_target_accepted_and_one_failed_is_a_permanent_failure():
    outcomes = {"a": A.FAILED, "b": A.DEAD, "c": A.DEAD}
    with pytest.raises(ProviderError) as failed:
        send(step_of(TriggerInstanceFactory()), answering(outcomes, []))
    assert failed.value.permanent and not isinstance(failed.value, AllTargetsDead)


def test_every_target_dead_is_removed_and_reported_as_such():
    removed: list[str] = []
    outcomes = dict.fromkeys("abc", A.DEAD)
    instance = TriggerInstanceFactory()
    with pytest.raises(AllTargetsDead) as dead:
        send(step_of(instance), answering(outcomes, []), removed=removed)
    assert sorted(removed) == ["a", "b", "c"] and dead.value.removed == 3


def test_a_dead_target_that_is_not_removable_fails_instead():
    fixed = [Target(id="webhook", provider="slack", label="hooks.example.com", removable=False)]
    removed: list[str] = []
    with pytest.raises(ProviderError) as failed:
        send(step_of(TriggerInstanceFactory()), answering({"webhook": A.DEAD}, []), fixed, removed)
    assert failed.value.permanent and not removed


def test_answers_that_come_together_are_written_once_with_the_outcome(monkeypatch):
    # Generous, so a loaded machine's thread scheduling stays inside it.
    monkeypatch.setattr(target_sends, "SAVE_GRACE_S", 5.0)
    instance = TriggerInstanceFactory()

    def answers_a_moment_later(target: Target) -> TargetResult:
        if target.id != "a":
            time.sleep(0.05)  # the others' answers come while the first's is in
        return TargetResult(A.ACCEPTED, "fcm", provider_message_id=f"msg-{target.id}")

    step = step_of(instance)
    assert send(step, answers_a_moment_later)["accepted"] == 3
    # Nothing written while the send ran: the three results go with the outcome.
    assert not Delivery.objects.filter(instance_id=instance.pk).exists()
    record_delivery(step)
    assert set(recorded(instance).targets) == {"a", "b", "c"}
