"""A burst of due ETA timers is fired without a 1 s poll between batches of 10
(notifyflow/broker/kombu_patches.py), and the fix goes once kombu no longer needs it."""

from __future__ import annotations

import time

import pytest
from kombu.asynchronous.hub import Hub

from notifyflow.broker.kombu_patches import apply_kombu_timer_fix


def _hub_with_due_timers(count: int) -> tuple[Hub, list[int]]:
    hub = Hub()
    fired: list[int] = []
    for n in range(count):
        hub.timer.call_after(0, fired.append, (n,))
    return hub, fired


@pytest.fixture
def restore_fire_timers():
    original = Hub.fire_timers
    yield
    Hub.fire_timers = original


def test_stock_kombu_still_polls_with_timers_due():
    """Fails when a kombu release fires due timers without waiting: the patch is then
    dead code to remove. Runs kombu's own ``fire_timers`` even in a process where the
    fix is applied (a worker's, or after the test below): the patch wraps it."""
    stock = getattr(Hub.fire_timers, "__wrapped__", Hub.fire_timers)
    hub, fired = _hub_with_due_timers(25)
    try:
        delay = stock(hub)
    finally:
        hub.close()
    if not (len(fired) < 25 and delay > 0):
        pytest.fail(
            "kombu no longer needs the timer fix: remove apply_kombu_timer_fix from "
            "notifyflow/broker/kombu_patches.py, its worker_init hook "
            "(executions/worker_hooks.py) and NOTIFYFLOW_KOMBU_TIMER_FIX "
            f"(stock fire_timers fired {len(fired)} of 25 due timers and asked for a "
            f"{delay} s poll)"
        )


def test_patched_kombu_comes_straight_back_while_timers_are_due(restore_fire_timers):
    apply_kombu_timer_fix()
    assert not apply_kombu_timer_fix()  # idempotent
    hub, fired = _hub_with_due_timers(25)
    assert [hub.fire_timers(), hub.fire_timers()] == [0, 0]
    assert len(fired) == 20
    hub.fire_timers()
    assert len(fired) == 25
    assert hub.fire_timers() == 1  # nothing due any more: the normal poll
    hub.close()


def test_patched_kombu_polls_no_longer_than_until_the_next_timer(restore_fire_timers):
    """Stock kombu, after a turn that fired its 10 timers, polls for 1 s whatever is due
    next: a timer due 50 ms later ran up to 950 ms late."""
    apply_kombu_timer_fix()
    hub, fired = _hub_with_due_timers(10)
    hub.timer.call_after(0.05, fired.append, ("next",))
    try:
        delay = hub.fire_timers()
        assert len(fired) == 10
        assert 0 < delay <= 0.05
        time.sleep(delay)
        assert hub.fire_timers() == 1  # it ran; nothing else is scheduled
        assert fired[-1] == "next"
    finally:
        hub.close()
