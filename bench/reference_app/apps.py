from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.apps import AppConfig


class ReferenceAppConfig(AppConfig):
    name = "bench.reference_app"
    label = "bench_reference"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_ready, worker_shutdown

        worker_ready.connect(_on_worker_ready, weak=False)
        worker_shutdown.connect(_on_worker_shutdown, weak=False)
        if os.environ.get("BENCH_KOMBU_TIMER_FIX") == "1":
            patch_kombu_fire_timers()


def patch_kombu_fire_timers() -> None:
    """Bench-only experiment, off unless BENCH_KOMBU_TIMER_FIX=1.

    kombu's ``Hub.fire_timers`` runs at most ``max_timers`` (10) due timers per event-loop
    turn and then returns ``delay or min_delay``: with timers still due, ``delay`` is None,
    so the loop polls the broker socket for up to 1 s before it fires the next 10. A burst
    of ETA tasks due at once (many instances resuming from the same delay) drains at ~10
    timers/s per worker node on an otherwise idle broker. This returns 0 instead when the
    loop stopped at ``max_timers``, so the next turn comes at once.
    """
    import errno
    import logging

    from kombu.asynchronous import hub as hub_module

    log = logging.getLogger("bench.kombu_timer_fix")

    def fire_timers(self: Any, min_delay: float = 1, max_delay: float = 10,
                    max_timers: int = 10, propagate: tuple = ()) -> float:
        timer = self.timer
        delay = None
        if timer and timer._queue:
            for _ in range(max_timers):
                delay, entry = next(self.scheduler)
                if entry is None:
                    break
                try:
                    entry()
                except propagate:
                    raise
                except (MemoryError, AssertionError):
                    raise
                except OSError as exc:
                    if exc.errno == errno.ENOMEM:
                        raise
                    log.error("Error in timer: %r", exc, exc_info=True)
                except Exception as exc:  # noqa: BLE001 - as kombu does
                    log.error("Error in timer: %r", exc, exc_info=True)
            else:
                return 0  # stopped at max_timers: more may be due, come straight back
        return min(delay or min_delay, max_delay)

    hub_module.Hub.fire_timers = fire_timers


def _marker(kind: str, sender: Any) -> Path | None:
    directory = os.environ.get("BENCH_MARKER_DIR")
    if not directory:
        return None
    hostname = getattr(sender, "hostname", None) or str(os.getpid())
    return Path(directory) / f"{kind}-{hostname}-{os.getpid()}.json"


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    path = _marker("ready", sender)
    if path is not None:
        path.write_text("{}")


def _on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    from .tasks import noop_stats_json

    path = _marker("noop", sender)
    if path is not None:
        path.write_text(noop_stats_json())
