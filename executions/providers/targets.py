"""What a push or chat provider call returns: one classified result per target (a device
token, a Web Push subscription, a chat channel or webhook), never an exception for what
the provider answered.

A push or chat node sends to each of a person's targets in turn and must know, per
target, whether to record it done, remove it, send again later or give up - so the
clients classify, and the node decides what the step becomes:

- ``accepted``: the provider took the message (``provider_message_id`` when it gives one);
- ``dead``: the target is gone for good (an unregistered token, a deleted webhook): remove
  it, and do not count it as a failure of the step;
- ``retry``: transient (429, 5xx, a timeout, a lost connection): send again later, not
  before ``retry_after_s`` when the provider said (``Retry-After``);
- ``failed``: permanent for this message (a bad payload, wrong credentials, an archived
  Slack channel): do not retry, keep the target.

Classification reads the provider's status and error *code* (FCM's ``errorCode``, APNs'
``reason``, Slack's ``error``), never its message text, which providers reword.
"""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass
from datetime import UTC
from enum import StrEnum
from typing import Any

from notifyflow import metrics

from .base import ProviderError


class TargetOutcome(StrEnum):
    ACCEPTED = "accepted"
    DEAD = "dead"
    RETRY = "retry"
    FAILED = "failed"


@dataclass(frozen=True)
class TargetResult:
    """One target's outcome. ``code`` is the provider's error code (``UNREGISTERED``,
    ``BadDeviceToken``, ``channel_not_found``, ...) or the HTTP status as text when the
    provider gives none; ``detail`` is for logs and the console only (never classified)."""

    outcome: TargetOutcome
    provider: str
    provider_message_id: str = ""
    code: str = ""
    retry_after_s: float | None = None
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.outcome == TargetOutcome.ACCEPTED

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON for a delivery's output (empty fields left out)."""
        shown: dict[str, Any] = {"outcome": str(self.outcome), "provider": self.provider}
        if self.provider_message_id:
            shown["message_id"] = self.provider_message_id
        if self.code:
            shown["code"] = self.code
        if self.retry_after_s is not None:
            shown["retry_after_s"] = self.retry_after_s
        if self.detail:
            shown["detail"] = self.detail[:500]
        return shown

    def as_error(self) -> ProviderError:
        """The house error for a node that raises on a target's failure: transient for
        ``retry``, permanent otherwise (an accepted result has no error to raise)."""
        if self.accepted:
            raise ValueError("an accepted target has no error")
        what = f"{self.provider} {self.outcome}: {self.code or 'error'}"
        if self.detail:
            what += f" ({self.detail[:200]})"
        return ProviderError(what, permanent=self.outcome != TargetOutcome.RETRY)


def counted(result: TargetResult) -> TargetResult:
    """``result``, counted in ``notifyflow_provider_targets_total{provider, outcome}``."""
    metrics.PROVIDER_TARGETS.labels(result.provider, str(result.outcome)).inc()
    return result


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds from now: delta-seconds or an HTTP date (RFC 9110);
    None when absent or unreadable, never negative."""
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def by_status(
    provider: str,
    status: int,
    *,
    code: str = "",
    retry_after: str | None = None,
    detail: str = "",
    dead: frozenset[int] = frozenset(),
) -> TargetResult:
    """The result of a non-2xx answer classified by its HTTP status alone: ``dead``
    statuses, then 408, 429 and 5xx transient (honouring ``Retry-After``), anything else
    permanent."""
    code = code or str(status)
    if status in dead:
        return TargetResult(TargetOutcome.DEAD, provider, code=code, detail=detail)
    if status in (408, 429) or status >= 500:
        return TargetResult(
            TargetOutcome.RETRY,
            provider,
            code=code,
            retry_after_s=retry_after_seconds(retry_after),
            detail=detail,
        )
    return TargetResult(TargetOutcome.FAILED, provider, code=code, detail=detail)


def unreachable(provider: str, exc: Exception) -> TargetResult:
    """A timeout or a lost connection: transient, the provider may not have seen it."""
    return TargetResult(
        TargetOutcome.RETRY,
        provider,
        code="connection_error",
        detail=f"{type(exc).__name__}: {exc}",
    )


def not_configured(provider: str, exc: ProviderError) -> TargetResult:
    """The provider's settings are missing or unreadable: permanent until fixed."""
    return TargetResult(TargetOutcome.FAILED, provider, code="not_configured", detail=str(exc))
