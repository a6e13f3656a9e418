"""The claim's concurrency rule, on both databases: at most the workflow's
current limit of executing instances per (workflow, key); waiting and parked instances
do not count; an instance without a key is never held back. On PostgreSQL, racing
claims on their own connections never admit more than the limit - and without the
advisory lock the same race does (so the race test can fail)."""

from __future__ import annotations

import importlib
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from tests.factories import TriggerInstanceFactory, WorkflowFactory
from triggers import state
from triggers.models import TriggerInstance, TriggerStatus
from workflows.concurrency import Concurrency

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def claim(instance) -> bool:
    return (
        state.claim(instance_id=instance.pk, worker="w", now=timezone.now() + timedelta(seconds=1))
        is not None
    )


def release(instance) -> None:
    lease = TriggerInstance.objects.get(pk=instance.pk).lease_token
    assert state.transition(
        instance_id=instance.pk,
        from_status=S.PROCESSING,
        to_status=S.COMPLETED,
        reason="done",
        actor="t",
        lease_token=lease,
    )


@pytest.fixture
def limited():
    return WorkflowFactory(concurrency=Concurrency(limit=2, key="{{ payload.tenant }}"))


def test_at_most_the_limit_execute_per_key_and_a_release_frees_a_slot(limited):
    a1, a2, a3 = TriggerInstanceFactory.create_batch(3, workflow=limited, concurrency_key="acme")
    other = TriggerInstanceFactory(workflow=limited, concurrency_key="globex")
    assert [claim(a1), claim(a2), claim(a3)] == [True, True, False]
    assert claim(other)  # another key has its own limit
    refused = TriggerInstance.objects.get(pk=a3.pk)
    assert (refused.status, refused.attempts, refused.lease_token) == (S.ENQUEUED, 0, None)
    release(a1)
    assert claim(a3)


def test_waiting_and_parked_instances_do_not_count(limited):
    parked = TriggerInstanceFactory.create_batch(
        3,
        workflow=limited,
        concurrency_key="acme",
        available_at=timezone.now() + timedelta(hours=1),
        dispatched_at=None,
    )
    assert all(p.status == S.ENQUEUED for p in parked)
    due = TriggerInstanceFactory.create_batch(2, workflow=limited, concurrency_key="acme")
    assert [claim(d) for d in due] == [True, True]


def test_the_claim_reads_the_current_limit(limited):
    instances = TriggerInstanceFactory.create_batch(4, workflow=limited, concurrency_key="acme")
    assert claim(instances[0])
    limited.concurrency_limit = 1
    limited.save(update_fields=["concurrency_limit"])
    assert not claim(instances[1])
    limited.concurrency_limit, limited.concurrency_key = None, ""
    limited.save(update_fields=["concurrency_limit", "concurrency_key"])
    assert claim(instances[1]) and claim(instances[2])  # no limit: admitted


def test_an_instance_without_a_key_is_never_held_back(limited):
    # Created before the workflow had a limit: its key is null.
    instances = TriggerInstanceFactory.create_batch(3, workflow=limited, concurrency_key=None)
    assert [claim(i) for i in instances] == [True, True, True]


def _race(instances, admits_sql: str | None = None) -> int:
    """Claim every instance at once, each from its own thread and connection; how many
    were claimed."""
    barrier = threading.Barrier(len(instances))
    won: list[bool] = []
    lock = threading.Lock()

    def race(instance) -> None:
        try:
            # Connect first: sixteen connections opened after the barrier spread the
            # claims over more than the broken function's pause on a loaded machine.
            connection.ensure_connection()
            barrier.wait()
            result = claim(instance)
            with lock:
                won.append(result)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(i,)) for i in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(won)


REAL = importlib.import_module("triggers.migrations.0020_concurrency_admits").CREATE
LOCK = "PERFORM pg_advisory_xact_lock(hashtextextended(p_key, p_workflow));"
VERDICT = "RETURN v_running < v_limit;"
# The function as it must not be, each with a pause that makes the race sure to be lost:
# without its lock (the pause between the count and the verdict: every claim counts
# before any commits), and STABLE (its count would read the calling statement's
# snapshot, taken before the lock was granted, so it would miss the previous claim's
# row; the pause holds the lock until every claim has started).
BROKEN = {
    "no lock": REAL.replace(LOCK, "").replace(VERDICT, "PERFORM pg_sleep(0.2); " + VERDICT),
    "stable": REAL.replace("VOLATILE", "STABLE").replace(LOCK, LOCK + " PERFORM pg_sleep(0.1);"),
}


def _rounds(limited, rounds: int) -> list[int]:
    claimed = []
    for round_ in range(rounds):
        instances = TriggerInstanceFactory.create_batch(
            16, workflow=limited, concurrency_key=f"round-{round_}"
        )
        claimed.append(_race(instances))
    return claimed


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_claims_on_their_own_connections_never_exceed_the_limit(limited):
    assert _rounds(limited, 5) == [2] * 5


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_without_the_lock_or_a_fresh_snapshot_the_same_race_exceeds_the_limit(limited, broken):
    """The controls: the race test fails against each broken function."""
    assert REAL.count(LOCK) == REAL.count(VERDICT) == 1 and "VOLATILE" in REAL
    with connection.cursor() as cursor:
        cursor.execute(BROKEN[broken])
    try:
        assert max(_rounds(limited, 2)) > 2
    finally:
        with connection.cursor() as cursor:
            cursor.execute(REAL)
