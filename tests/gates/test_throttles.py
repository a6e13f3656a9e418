"""Throttle counters: a sliding window per (scope, subject, key), reset, the
list's state, and many workers racing on one key against PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from gates.models import ThrottleCounter
from gates.throttles import (
    epoch_ms,
    throttle_pass,
    throttle_reset,
    throttle_state,
    throttles_list,
    workflow_subject,
)
from tests.factories import ThrottleCounterFactory

HOUR = timedelta(hours=1)


def _pass(now, *, key="", subject="wf:gate", scope="workflow", limit=2, window=HOUR, **kw):
    return throttle_pass(
        scope=scope, subject=subject, key=key, limit=limit, window=window, now=now, **kw
    )


@pytest.mark.both_databases
@pytest.mark.django_db
def test_at_most_limit_pass_in_a_sliding_window():
    start = timezone.now()
    first = _pass(start)
    second = _pass(start + timedelta(minutes=10))
    third = _pass(start + timedelta(minutes=20))
    assert (first.passed, first.count) == (True, 1)
    assert (second.passed, second.count) == (True, 2)
    assert not third.passed and third.count == 2
    # Room again when the oldest hit leaves the window (sliding, not fixed buckets).
    assert third.retry_at is not None
    assert abs((third.retry_at - (start + HOUR)).total_seconds()) < 0.002
    assert not _pass(start + HOUR - timedelta(seconds=1)).passed
    later = _pass(start + HOUR + timedelta(seconds=1))
    assert (later.passed, later.count) == (True, 2)  # the 10-minute hit is still in
    refused = _pass(start + HOUR + timedelta(minutes=5))
    assert refused.retry_at is not None
    assert abs((refused.retry_at - (start + timedelta(minutes=70))).total_seconds()) < 0.002
    # A refused pass records nothing: the counter holds only what passed.
    assert len(ThrottleCounter.objects.get().hits) == 2


@pytest.mark.both_databases
@pytest.mark.django_db
def test_keys_subjects_and_scopes_are_counted_apart():
    now = timezone.now()
    assert _pass(now, limit=1).passed
    assert not _pass(now, limit=1).passed
    assert _pass(now, limit=1, key="other").passed
    assert _pass(now, limit=1, subject="wf:other-node").passed
    assert _pass(now, limit=1, scope="recipient", subject="wf:gate").passed
    assert ThrottleCounter.objects.count() == 4


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_forced_pass_goes_through_a_full_key_and_is_counted():
    now = timezone.now()
    assert _pass(now, limit=1).passed
    forced = _pass(now, limit=1, force=True)
    assert (forced.passed, forced.count) == (True, 2)
    assert not _pass(now, limit=1).passed


@pytest.mark.both_databases
@pytest.mark.django_db
def test_nodes_sharing_a_recipient_key_keep_the_longest_window_of_hits():
    now = timezone.now()
    day = timedelta(days=1)
    assert _pass(now, scope="recipient", subject="ada", limit=2, window=day).passed
    # A node with a one-minute window an hour later: the first hit is out of its window,
    # but kept for the daily node, which still counts it.
    later = now + HOUR
    assert _pass(later, scope="recipient", subject="ada", limit=5, window=timedelta(minutes=1))
    assert len(ThrottleCounter.objects.get().hits) == 2
    refused = _pass(later, scope="recipient", subject="ada", limit=2, window=day)
    assert not refused.passed and refused.count == 2


@pytest.mark.both_databases
@pytest.mark.django_db
def test_reset_deletes_the_matching_counters_and_the_key_has_room_again():
    now = timezone.now()
    for subject in ("shop:gate", "shop:other", "blog:gate"):
        _pass(now, limit=1, subject=subject, key="k")
    _pass(now, limit=1, scope="recipient", subject="ada", key="k")
    _pass(now, limit=1, scope="recipient", subject="bob", key="k")
    _pass(now, limit=1, scope="recipient", subject="ada", key="j")
    assert throttle_reset(scope="workflow", key="k", workflow="shop", node="gate") == 1
    assert _pass(now, limit=1, subject="shop:gate", key="k").passed
    assert throttle_reset(scope="workflow", key="k", workflow="shop") == 2
    assert throttle_reset(scope="recipient", key="k", recipient="ada") == 1
    assert throttle_reset(scope="recipient", key="k") == 1  # bob's
    assert throttle_reset(scope="workflow", key="k") == 1  # blog's
    assert list(ThrottleCounter.objects.values_list("subject", "key")) == [("ada", "j")]
    assert throttle_reset(scope="recipient", key="nothing") == 0


@pytest.mark.both_databases
@pytest.mark.django_db
def test_the_list_filters_and_shows_the_count_in_the_window():
    now = timezone.now()
    full = ThrottleCounterFactory(
        subject=workflow_subject(workflow="shop", node="gate"),
        key="promo",
        hits=[epoch_ms(now - timedelta(hours=2)), epoch_ms(now - timedelta(minutes=30))]
        + [epoch_ms(now - timedelta(minutes=10))],
        limit=2,
    )
    ThrottleCounterFactory(scope="recipient", subject="ada", key="promo")
    assert list(throttles_list(scope="workflow")) == [full]
    assert list(throttles_list(workflow="shop", node="gate", key="promo")) == [full]
    assert [c.subject for c in throttles_list(key="promo")] == ["shop:gate", "ada"]
    assert [c.subject for c in throttles_list(recipient="ada")] == ["ada"]
    assert list(throttles_list(workflow="blog")) == []
    state = throttle_state(full, now=now)
    assert state.count == 2
    assert state.oldest_hit is not None
    assert abs((state.oldest_hit - (now - timedelta(minutes=30))).total_seconds()) < 0.002
    assert abs((state.next_room_at - (now + timedelta(minutes=30))).total_seconds()) < 0.002
    empty = throttle_state(ThrottleCounterFactory(hits=[]), now=now)
    assert (empty.count, empty.oldest_hit, empty.next_room_at) == (0, None, now)


def _race(*, key: str, limit: int, workers: int) -> list[bool]:
    """``workers`` threads, each on its own connection, pass ``key`` at once."""
    barrier = threading.Barrier(workers)
    results: list[bool] = []
    lock = threading.Lock()
    now = timezone.now()

    def race() -> None:
        try:
            barrier.wait()
            decision = _pass(now, key=key, limit=limit)
            with lock:
                results.append(decision.passed)
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_workers_never_let_more_than_limit_through():
    """40 threads, each with its own database connection, race on one key: exactly
    ``limit`` pass, every time."""
    limit, workers = 7, 40
    for round_ in range(3):
        results = _race(key=f"round-{round_}", limit=limit, workers=workers)
        assert sorted(results) == [False] * (workers - limit) + [True] * limit
        counter = ThrottleCounter.objects.get(key=f"round-{round_}")
        assert len(counter.hits) == limit
