"""Per-process caches for the hot paths (API keys, workflows by key, pinned versions).

One helper so every cache is bounded, expires, is safe under threads, and is emptied by
one call (``clear_all``: tests, whose rolled-back databases reuse ids).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import TTLCache

V = TypeVar("V")

_registry: list[ProcessCache] = []


class ProcessCache(Generic[V]):
    """A bounded TTL cache. ``get_or_load`` calls ``load`` outside the lock (a database
    query must not serialize the threads of a process); ``None`` is never cached."""

    def __init__(self, *, name: str, maxsize: int, ttl_s: float) -> None:
        self.name = name
        self._cache: TTLCache[Hashable, V] = TTLCache(maxsize=maxsize, ttl=ttl_s)
        self._lock = threading.Lock()
        _registry.append(self)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._cache.get(key)

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._cache[key] = value

    def get_or_load(self, key: Hashable, load: Callable[[], V | None]) -> V | None:
        hit = self.get(key)
        if hit is not None:
            return hit
        value = load()
        if value is not None:
            self.put(key, value)
        return value

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._cache.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


def clear_all() -> None:
    for cache in _registry:
        cache.clear()
