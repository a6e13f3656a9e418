"""Per-channel send slots of one worker: a provider that hangs holds at most its
channel's share of the worker's processes, so the other channels keep going.

Every provider call (the delivery guard's send) holds one of its channel's slots. A
worker has ``NOTIFYFLOW_CHANNEL_SLOTS`` slots per channel (default: its process count
less one), so with the SMTP server hung, email steps occupy at most all but one of the
processes and an SMS step still finds one free. A step that finds no free slot within
``NOTIFYFLOW_CHANNEL_SLOT_WAIT_S`` sends nothing and is deferred by
``NOTIFYFLOW_CHANNEL_BUSY_RETRY_S`` (``ChannelBusy``; no attempt counted).

A slot is an exclusive ``flock`` on one of the channel's lock files in a directory of
this worker (its main process id): shared by the worker's processes (prefork) and
threads, free of any network round trip, and released by the kernel when a process dies
(a hard time limit's SIGKILL leaks none). Outside a worker (the API, tests, a shell) no
slots are configured and sends are not limited.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from celery.concurrency.solo import TaskPool as SoloPool
from django.conf import settings

from .providers.base import ProviderError


class ChannelBusy(ProviderError):
    """Every slot of the channel is held by a send in flight: nothing was sent; run the
    step again after ``retry_after_s`` (not a failed attempt)."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, permanent=False)
        self.retry_after_s = retry_after_s


# Set in the worker's main process (``configure``), inherited by its pool's processes.
_worker: Any = None  # the WorkController: its concurrency is resolved before the fork
_directory: Path | None = None


def configure(*, worker: Any, directory: Path | None = None) -> None:
    """Limit sends per channel in this worker (called at ``worker_init``)."""
    global _worker, _directory
    _worker = worker
    _directory = directory or Path(tempfile.gettempdir()) / f"notifyflow-slots-{os.getpid()}"
    _directory.mkdir(parents=True, exist_ok=True)


def reset() -> None:
    global _worker, _directory
    _worker = _directory = None


def slots_per_channel() -> int:
    """NOTIFYFLOW_CHANNEL_SLOTS, or the worker's process count less one; 0 (no limit)
    outside a worker and in a worker of one process (``-c 1``, ``-P solo``), which never
    has two sends in flight."""
    if _worker is None:
        return 0
    if settings.NOTIFYFLOW_CHANNEL_SLOTS > 0:
        return settings.NOTIFYFLOW_CHANNEL_SLOTS
    concurrency = getattr(_worker, "concurrency", 1)
    processes = concurrency if isinstance(concurrency, int) else 1
    pool = getattr(_worker, "pool_cls", None)
    if isinstance(pool, type) and issubclass(pool, SoloPool):
        processes = 1  # -P solo runs one task at a time whatever --concurrency says
    return processes - 1 if processes > 1 else 0


@contextmanager
def channel_slot(channel: str) -> Iterator[None]:
    """Hold one of ``channel``'s slots for the block; ChannelBusy if none frees up within
    NOTIFYFLOW_CHANNEL_SLOT_WAIT_S."""
    count = slots_per_channel()
    if count <= 0 or _directory is None:
        yield
        return
    deadline = time.monotonic() + settings.NOTIFYFLOW_CHANNEL_SLOT_WAIT_S
    while True:
        held = _take_a_slot(_directory, channel, count)
        if held is not None:
            break
        if time.monotonic() >= deadline:
            raise ChannelBusy(
                f"every one of the {count} {channel} send slots of this worker is busy "
                "(a provider slow or hung): nothing sent, the step runs again shortly",
                retry_after_s=settings.NOTIFYFLOW_CHANNEL_BUSY_RETRY_S,
            )
        time.sleep(0.01)
    try:
        yield
    finally:
        os.close(held)  # closing the descriptor releases the lock


def _take_a_slot(directory: Path, channel: str, count: int) -> int | None:
    """An open descriptor holding one of the channel's locks, or None if all are held."""
    for index in range(count):
        fd = os.open(directory / f"{channel}-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd
    return None
