"""Provider failover: an ordered list of providers per channel, tried in turn within one
attempt, every call recorded, with an optional per-provider circuit breaker.

A transient ``ProviderError`` tries the next provider; a permanent one (a bad recipient)
stops at once. Each call is appended to the attempt log the delivery guard opened
(``collect_attempts``), which writes it as ``DeliveryAttempt`` rows in the step's
outcome transaction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from notifyflow.caching import ProcessCache

from .base import ProviderError

R = TypeVar("R")


@dataclass(frozen=True)
class ProviderSpec:
    """One configured provider: ``backend`` is a Django email backend path or an SMS
    backend name/path; ``options`` are passed to its constructor."""

    name: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)


def provider_specs(configured: Any, default_backend: str) -> list[ProviderSpec]:
    """NOTIFYFLOW_EMAIL_BACKENDS / NOTIFYFLOW_SMS_BACKENDS as specs. Entries are backend
    paths or ``{name?, backend, options?}``; empty means the channel's single default
    backend (EMAIL_BACKEND / SMS_BACKEND), as before failover existed."""
    if not configured:
        return [ProviderSpec(name=default_backend, backend=default_backend)]
    specs = []
    for entry in configured:
        if isinstance(entry, str):
            specs.append(ProviderSpec(name=entry, backend=entry))
        else:
            backend = entry["backend"]
            specs.append(
                ProviderSpec(
                    name=entry.get("name") or backend,
                    backend=backend,
                    options=dict(entry.get("options") or {}),
                )
            )
    return specs


# --- the attempt log ---------------------------------------------------------------------

_attempts: ContextVar[list[dict[str, Any]] | None] = ContextVar("_attempts", default=None)


@contextmanager
def collect_attempts() -> Iterator[list[dict[str, Any]]]:
    """Collect the provider calls made inside the block (the delivery guard's send)."""
    collected: list[dict[str, Any]] = []
    token = _attempts.set(collected)
    try:
        yield collected
    finally:
        _attempts.reset(token)


def record_attempt(
    *, provider: str, outcome: str, latency_ms: int = 0, error: str = "", message_id: str = ""
) -> None:
    """Append one provider call to the open attempt log (none open: not recorded)."""
    log = _attempts.get()
    if log is not None:
        log.append(
            {
                "provider": provider[:200],
                "outcome": outcome,
                "latency_ms": max(0, latency_ms),
                "error": error[:2000],
                "message_id": message_id[:255],
                "at": timezone.now(),
            }
        )


# --- the circuit breaker -----------------------------------------------------------------


@dataclass
class _Circuit:
    failures: int = 0
    open_until: float = 0.0


_circuits: ProcessCache[_Circuit] = ProcessCache(name="provider circuits", maxsize=256, ttl_s=3600)
_circuit_lock = threading.Lock()


def _circuit(key: tuple[str, str]) -> _Circuit:
    circuit = _circuits.get(key)
    if circuit is None:
        circuit = _Circuit()
        _circuits.put(key, circuit)
    return circuit


def circuit_is_open(channel: str, name: str) -> bool:
    if settings.NOTIFYFLOW_CIRCUIT_FAILURES <= 0:
        return False
    with _circuit_lock:
        return _circuit((channel, name)).open_until > time.monotonic()


def _circuit_result(channel: str, name: str, ok: bool) -> None:
    threshold = settings.NOTIFYFLOW_CIRCUIT_FAILURES
    if threshold <= 0:
        return
    with _circuit_lock:
        circuit = _circuit((channel, name))
        if ok:
            circuit.failures, circuit.open_until = 0, 0.0
            return
        circuit.failures += 1
        if circuit.failures >= threshold:
            # Open for the cool-down; the first call after it is a trial (half-open):
            # one more failure re-opens it at once.
            circuit.open_until = time.monotonic() + settings.NOTIFYFLOW_CIRCUIT_OPEN_S
            circuit.failures = threshold - 1


# --- the loop ----------------------------------------------------------------------------


def send_with_failover(
    *,
    channel: str,
    providers: list[ProviderSpec],
    call: Callable[[ProviderSpec], R],
    message_id: Callable[[R], str] = lambda result: str(getattr(result, "message_id", "")),
) -> R:
    """``call`` each provider in order until one accepts. Raises the permanent error
    at once, or the last transient one when every provider failed (or was skipped)."""
    last: ProviderError | None = None
    for provider in providers:
        if circuit_is_open(channel, provider.name):
            record_attempt(provider=provider.name, outcome="skipped", error="circuit open")
            continue
        started = time.monotonic()
        try:
            result = call(provider)
        except ProviderError as exc:
            latency = int((time.monotonic() - started) * 1000)
            outcome = "permanent" if exc.permanent else "transient"
            record_attempt(
                provider=provider.name, outcome=outcome, latency_ms=latency, error=str(exc)
            )
            if exc.permanent:
                raise
            _circuit_result(channel, provider.name, ok=False)
            last = exc
            continue
        latency = int((time.monotonic() - started) * 1000)
        record_attempt(
            provider=provider.name,
            outcome="sent",
            latency_ms=latency,
            message_id=message_id(result),
        )
        _circuit_result(channel, provider.name, ok=True)
        return result
    if last is None:
        raise ProviderError(f"every {channel} provider's circuit is open", permanent=False)
    if len(providers) > 1:
        raise ProviderError(
            f"all {len(providers)} {channel} providers failed; last: {last}", permanent=False
        ) from last
    raise last
