"""The one function that decides what a failed attempt leads to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings


@dataclass(frozen=True)
class RetryDecision:
    attempts: int
    give_up: bool
    retry_at: datetime | None


def decide_retry(
    *, attempts_so_far: int, permanent: bool, now: datetime, immediate: bool = False
) -> RetryDecision:
    """``attempts`` counts failures of the current node. The n-th failure is retried at
    ``now + base * 2**(n-1)``; the failure after NOTIFYFLOW_MAX_RETRIES retries (the
    4th by default) or any permanent failure gives up. ``immediate`` retries at once
    (a lost worker is not the provider's fault) but still counts the attempt."""
    attempts = attempts_so_far + 1
    if permanent or attempts > settings.NOTIFYFLOW_MAX_RETRIES:
        return RetryDecision(attempts, True, None)
    if immediate:
        return RetryDecision(attempts, False, now)
    delay = settings.NOTIFYFLOW_RETRY_BASE_DELAY_S * 2 ** (attempts - 1)
    return RetryDecision(attempts, False, now + timedelta(seconds=delay))
