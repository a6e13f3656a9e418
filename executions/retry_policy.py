"""The one function that decides what a failed attempt leads to."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class RetryDecision:
    attempts: int
    give_up: bool
    retry_at: datetime | None


def decide_retry(
    *,
    attempts_so_far: int,
    permanent: bool,
    now: datetime,
    immediate: bool = False,
    policy: Mapping[str, Any] | None = None,
    retry_after_s: float | None = None,
) -> RetryDecision:
    """``attempts`` counts failures of the current node. The n-th failure is retried at
    ``now + base * 2**(n-1)``; the failure after ``max_retries`` retries (the 4th by
    default) or any permanent failure gives up. ``immediate`` retries at once (a lost
    worker is not the provider's fault) but still counts the attempt.

    ``policy`` is the node's optional ``retry`` config (validated at save): each of
    ``max_retries``, ``base_delay_s`` overrides NOTIFYFLOW_MAX_RETRIES /
    NOTIFYFLOW_RETRY_BASE_DELAY_S; ``max_delay_s`` caps the delay; ``jitter`` (0-1)
    takes up to that fraction off it at random, so retries of many instances spread out.

    ``retry_after_s`` is how long the provider asked us to wait (``Retry-After``): the
    retry is never sooner, whatever the policy's delay or its ``max_delay_s``.
    """
    policy = policy or {}
    max_retries = policy.get("max_retries", settings.NOTIFYFLOW_MAX_RETRIES)
    attempts = attempts_so_far + 1
    if permanent or attempts > max_retries:
        return RetryDecision(attempts, True, None)
    if immediate:
        return RetryDecision(attempts, False, now)
    base = policy.get("base_delay_s", settings.NOTIFYFLOW_RETRY_BASE_DELAY_S)
    delay = base * 2 ** (attempts - 1)
    if policy.get("max_delay_s") is not None:
        delay = min(delay, policy["max_delay_s"])
    if policy.get("jitter"):
        delay *= 1 - policy["jitter"] * random.random()
    if retry_after_s is not None:
        delay = max(delay, retry_after_s)
    return RetryDecision(attempts, False, now + timedelta(seconds=delay))
