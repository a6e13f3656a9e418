"""Two patches of kombu, each behind a setting.

**The Redis transport with one client per channel** (``CELERY_BROKER_TRANSPORT``, set
for ``redis://`` brokers). kombu builds a new ``redis.Redis`` object for every message
it publishes (``Channel._put`` -> ``conn_or_acquire`` -> ``_create_client``). The object
holds no connection (the channel's pool does), but redis-py's constructor is wrapped by
its ``deprecated_args`` decorator, which inspects the call's arguments each time: a
visible share of a ``POST /api/v1/triggers/`` under gunicorn (py-spy, bench/README.md).
The channel's synchronous client is built once and reused; redis-py clients are
thread-safe and share the same pool as before, so connections, reconnects and retries
behave as they did.

**The worker event loop's timer fix** (``NOTIFYFLOW_KOMBU_TIMER_FIX``, applied at
``worker_init`` by executions/worker_hooks.py). kombu's ``Hub.fire_timers`` fires at
most ``max_timers`` (10) due timers per event-loop turn and then returns
``delay or min_delay``; after firing, ``delay`` is None, so the loop then polls the
broker for up to ``min_delay`` (1 s) before firing the next 10, even though more are
already due. Many instances resuming from the same delay (or backoff) hit exactly that
and ran seconds late (bench "delay", bench/RESULTS.md). The same 1 s comes back when
the 10th timer of a turn was the last one due and the next one is due a moment later:
the loop slept past it for up to a second unless the broker woke it (a node sat idle
with 25 timers overdue by 160 ms while the delay bench's tail grew: bench/RESULTS.md,
issue 44, seventh round). The fix wraps the original (no copy of kombu's code): after a
turn, the loop polls no longer than until the next timer, and not at all if it is due.
tests/notifyflow/broker/test_kombu_patches.py fails once a kombu release no longer needs it.
"""

from __future__ import annotations

import functools
from time import monotonic
from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        if self._sync_client is None:
            self._sync_client = super()._create_client()
        return self._sync_client


class Transport(kombu_redis.Transport):
    Channel = Channel


def apply_kombu_timer_fix() -> bool:
    """Patch ``kombu.asynchronous.hub.Hub.fire_timers``; False if already patched.
    The original stays reachable as the patch's ``__wrapped__``."""
    from kombu.asynchronous.hub import Hub

    if getattr(Hub.fire_timers, "notifyflow_fix", False):
        return False
    original = Hub.fire_timers

    @functools.wraps(original)
    def fire_timers(self: Any, *args: Any, **kwargs: Any) -> float:
        delay = original(self, *args, **kwargs)
        queue = getattr(self.timer, "_queue", None) if self.timer else None
        if queue:  # never poll past the next timer: 0 if it is due already
            return max(0.0, min(delay, queue[0][0] - monotonic()))
        return delay

    fire_timers.notifyflow_fix = True  # type: ignore[attr-defined]
    Hub.fire_timers = fire_timers  # type: ignore[method-assign]
    return True
