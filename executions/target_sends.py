"""One message to each of several targets - a person's push devices, their chat
connections - as one delivery with a result per target.

The delivery guard (``deliveries.guarded_send``) holds around the whole send: one
``Delivery`` row per (instance, node), its ``sending`` marker, the channel's send slot,
one ``DeliveryAttempt`` row per provider call. Inside it each target gets its own
result (``providers.targets.TargetResult``), kept by target id in the delivery's
``targets`` column:

- **accepted, dead, failed are final**: a later attempt of the step sends only to the
  targets with no final result yet - a device that accepted never gets the message
  twice from a retry;
- **the guard per target**: an accepted result is written durably (its own statement,
  fenced on the row still being ``sending``) before the next target is tried, so a
  worker killed mid-send resends to no target that had accepted. The last target's
  result goes with the step's outcome (``record_delivery``), as a single send's does;
  the window left is the guard's own, per target: a worker that dies between a
  provider's acceptance and that write sends to that one target again on the retry;
- **dead** targets (an unregistered token, a deleted webhook, by the provider's error
  code) are removed at once by the node's ``remove_dead`` (audited, a status event), and
  the others still get the message;
- **retry** (429, 5xx, a timeout) ends the attempt transient once every other target
  was tried, retried by the node's retry policy, never sooner than the longest
  ``Retry-After`` any of them asked for.

The step then succeeds when at least one target accepted and none waits for a retry
(the delivery ``sent``: its ``delivery.sent`` event counts the targets by outcome);
fails permanently when none accepted and some failed; and is skipped
(``missing_channel_data``) when every target turned out dead and was removed.

A worker whose lease was recovered while it was still sending (hung, not killed) may
overwrite a newer attempt's results with its own: the at-least-once window of every
channel, per target here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.utils import timezone

from .deliveries import guarded_send
from .models import Delivery, DeliveryAttempt, DeliveryStatus
from .providers.base import ProviderError
from .providers.failover import record_attempt
from .providers.targets import TargetOutcome, TargetResult
from .step import StepContext

FINAL = frozenset({TargetOutcome.ACCEPTED, TargetOutcome.DEAD, TargetOutcome.FAILED})
_ATTEMPT_OUTCOME = {
    TargetOutcome.ACCEPTED: DeliveryAttempt.Outcome.SENT,
    TargetOutcome.RETRY: DeliveryAttempt.Outcome.TRANSIENT,
    TargetOutcome.DEAD: DeliveryAttempt.Outcome.PERMANENT,
    TargetOutcome.FAILED: DeliveryAttempt.Outcome.PERMANENT,
}


@dataclass(frozen=True)
class Target:
    """One place the message goes. ``id``: the device's or connection's id (a node's
    fixed target: its kind); ``label``: what the delivery and the console show of it,
    never a secret (a token's last characters, a webhook's host); ``address``: what the
    provider call needs (a token, a subscription, a channel id, a URL); ``removable``: a
    person's device or connection (removed when dead), not a node's fixed target (whose
    death is a failure)."""

    id: str
    provider: str
    label: str
    address: Any = None
    removable: bool = True


SendOne = Callable[[Target], TargetResult]
RemoveDead = Callable[[Target, TargetResult], bool]


class AllTargetsDead(ProviderError):
    """Every target turned out dead and was removed: the node skips
    (``missing_channel_data``); nothing failed."""

    def __init__(self, message: str, *, removed: int) -> None:
        super().__init__(message, permanent=True)
        self.removed = removed


def send_to_targets(
    *,
    step: StepContext,
    channel: str,
    targets: Sequence[Target],
    send: SendOne,
    remove_dead: RemoveDead,
    noun: str,
) -> dict[str, Any]:
    """Send to each target that has no final result yet, under the delivery guard;
    the step's output ``{<noun>s, accepted, removed, failed, message_id, sent_at}``.
    Raises ProviderError: transient (with ``retry_after_s``) when a target is to be
    retried, permanent when none accepted and some failed, ``AllTargetsDead`` when all
    were dead. ``noun`` names a target in errors ("device", "connection")."""
    run = partial(_send_all, step, list(targets), send, remove_dead, noun)
    return guarded_send(step=step, channel=channel, recipient="", send=run)


def _send_all(
    step: StepContext,
    targets: list[Target],
    send: SendOne,
    remove_dead: RemoveDead,
    noun: str,
) -> dict[str, Any]:
    # Results of earlier attempts: the final ones stay (never sent again), others go
    # (sent again if the target is still there).
    results = {
        target_id: result
        for target_id, result in _earlier_results(step).items()
        if result.get("outcome") in FINAL
    }
    step.delivery.targets = results
    todo = [target for target in targets if target.id not in results]
    for index, target in enumerate(todo):
        results[target.id] = _send_one(step, target, send, remove_dead)
        if results[target.id]["outcome"] == TargetOutcome.ACCEPTED and index < len(todo) - 1:
            _save(step, results)
    return _outcome(list(results.values()), noun)


def _earlier_results(step: StepContext) -> dict[str, dict[str, Any]]:
    """The delivery's results so far: none on its first attempt (no read)."""
    if step.delivery.attempt <= 1:
        return {}
    saved = (
        Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id)
        .values_list("targets", flat=True)
        .first()
    )
    return dict(saved or {})


def _send_one(
    step: StepContext, target: Target, send: SendOne, remove_dead: RemoveDead
) -> dict[str, Any]:
    started = time.monotonic()
    result = send(target)
    latency = int((time.monotonic() - started) * 1000)
    if result.outcome == TargetOutcome.DEAD and not target.removable:
        # A node's own channel or URL is gone: the workflow's author must fix it.
        result = TargetResult(
            TargetOutcome.FAILED, result.provider, code=result.code, detail=result.detail
        )
    record_attempt(
        provider=target.provider,
        outcome=_ATTEMPT_OUTCOME[result.outcome],
        latency_ms=latency,
        error="" if result.accepted else f"{target.label}: {result.outcome} {result.code}",
        message_id=result.provider_message_id,
    )
    entry = {**result.as_dict(), "target": target.label, "at": timezone.now().isoformat()}
    if result.outcome == TargetOutcome.DEAD:
        entry["removed"] = remove_dead(target, result)
    return entry


def _save(step: StepContext, results: Mapping[str, Any]) -> None:
    """The results so far, durably, before the next target is tried (autocommit: no
    transaction is open while a step sends)."""
    Delivery.objects.filter(
        instance_id=step.instance_id, node_id=step.node_id, status=DeliveryStatus.SENDING
    ).update(targets=dict(results))


def _outcome(counted: list[dict[str, Any]], noun: str) -> dict[str, Any]:
    """The step's output, or the ProviderError the attempt ends with: ``counted`` are
    this attempt's results and the earlier final ones (a target removed since its
    retry is not waited for)."""
    retry = [r for r in counted if r["outcome"] == TargetOutcome.RETRY]
    accepted = [r for r in counted if r["outcome"] == TargetOutcome.ACCEPTED]
    failed = [r for r in counted if r["outcome"] == TargetOutcome.FAILED]
    dead = [r for r in counted if r["outcome"] == TargetOutcome.DEAD]
    if retry:
        waits = [r["retry_after_s"] for r in retry if r.get("retry_after_s") is not None]
        raise ProviderError(
            f"{len(retry)} of {len(counted)} {noun}s to retry ({_codes(retry)}); "
            f"{len(accepted)} accepted",
            permanent=False,
            retry_after_s=max(waits) if waits else None,
        )
    if not accepted and failed:
        raise ProviderError(
            f"no {noun} accepted: {len(failed)} failed ({_codes(failed)})", permanent=True
        )
    if not accepted:
        raise AllTargetsDead(
            f"every {noun} was dead and is removed ({_codes(dead)})", removed=len(dead)
        )
    return {
        f"{noun}s": len(counted),
        "accepted": len(accepted),
        "removed": len(dead),
        "failed": len(failed),
        "message_id": str(accepted[0].get("message_id", "")),
        "sent_at": timezone.now().isoformat(),
    }


def _codes(results: Sequence[Mapping[str, Any]]) -> str:
    """``fcm QUOTA_EXCEEDED, apns 503``: what the providers answered, each once."""
    seen = dict.fromkeys(f"{r.get('provider')} {r.get('code') or r['outcome']}" for r in results)
    return ", ".join(seen)
