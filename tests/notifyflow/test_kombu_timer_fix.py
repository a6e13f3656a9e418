"""A burst of due ETA timers is fired without a 1 s poll between batches of 10."""

from __future__ import annotations

import pytest
from kombu.asynchronous.hub import Hub


def _hub_with_due_timers(count: int) -> tuple[Hub, list[int]]:
    hub = Hub()
    fired: list[int] = []
    for n in range(count):
        hub.timer.call_after(0, fired.append, (n,))
    return hub, fired


@pytest.fixture
def stock_fire_timers():
    original = Hub.fire_timers
    yield original
    Hub.fire_timers = original


def test_stock_kombu_waits_a_second_after_ten_due_timers(stock_fire_timers):
    if getattr(stock_fire_timers, "notifyflow_fix", False):
        pytest.skip("already patched in this process")
    hub, fired = _hub_with_due_timers(25)
    delay = hub.fire_timers()
    hub.close()
    if delay != 1:
        pytest.skip("this kombu no longer polls for 1 s with timers due; the fix is moot")
    assert len(fired) == 10  # 15 timers still due, yet it asked for a 1 s poll


def test_patched_kombu_comes_straight_back_while_timers_are_due(stock_fire_timers):
    from executions.kombu_timers import apply_kombu_timer_fix

    apply_kombu_timer_fix()
    assert not apply_kombu_timer_fix()  # idempotent
    hub, fired = _hub_with_due_timers(25)
    assert [hub.fire_timers(), hub.fire_timers()] == [0, 0]
    assert len(fired) == 20
    hub.fire_timers()
    assert len(fired) == 25
    assert hub.fire_timers() == 1  # nothing due any more: the normal poll
    hub.close()
