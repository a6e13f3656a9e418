"""One message to each of several targets - a person's push devices, their chat
connections - as one delivery with a result per target.

The delivery guard (``deliveries.guarded_send``) holds around the whole send: one
``Delivery`` row per (instance, node), the channel's send slot,
one ``DeliveryAttempt`` row per provider call. Inside it each target gets its own
result (``providers.targets.TargetResult``), kept by target id in the delivery's
``targets`` column:

- **accepted, dead, failed are final**: a later attempt of the step sends only to the
  targets with no final result yet - a device that accepted never gets the message
  twice from a retry;
- **the provider calls overlap**: one target's call runs in the step's own thread,
  several go out at once from the process's send threads (each on a kept-alive
  connection of its own: ``connections.ConnectionPerSender``), so against providers
  tens of ms away a person's three devices wait about one round trip, not three (on loopback,
  where client and provider are CPU-bound, it buys nothing: bench/RESULTS.md, issue
  41); the results are handled, and the database touched, in the step's thread only,
  as each answer comes;
- **the guard per target**: an accepted result is written durably (its own statement,
  an upsert of the row marked ``sending``, never over a ``sent`` one) as soon as it
  comes while other answers are awaited (those that come within ``SAVE_GRACE_S`` of the
  first are written with it), so a worker killed mid-send resends to no target that had
  accepted. The last answer goes with the step's outcome
  (``record_delivery``), as a single send's does; the window left is the guard's own,
  per target: a worker that dies between a provider's acceptance and its record sends
  to that one target again on the retry. A call that raises (a bug, not a provider's
  answer) is raised once the others are in and recorded;
- **dead** targets (an unregistered token, a deleted webhook, by the provider's error
  code) are removed at once by the node's ``remove_dead`` (audited, a status event), and
  the others still get the message;
- **retry** (429, 5xx, a timeout) ends the attempt transient once every other target
  answered, retried by the node's retry policy, never sooner than the longest
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

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import connection
from django.utils import timezone

from notifyflow import db

from .deliveries import guarded_send
from .models import Delivery, DeliveryAttempt, DeliveryStatus
from .providers.base import ProviderError
from .providers.failover import record_attempt
from .providers.targets import TargetOutcome, TargetResult
from .step import StepContext

# Provider calls of one step in flight at once (a person has at most 20 devices).
SEND_THREADS = 8
# How long the first answer waits for the others before it is written on its own: a
# person's devices answer together (one round trip apart at most), and writing each
# answer while the next was milliseconds away cost a statement a step (bench/RESULTS.md,
# issue 44). A worker killed within this window sends to that target again.
SAVE_GRACE_S = 0.05
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
    death is a failure); ``secrets``: what of the person's channel data it holds
    (``recipients.channel_data.device_secrets``), for the scrub of a step fenced by an
    erasure."""

    id: str
    provider: str
    label: str
    address: Any = None
    removable: bool = True
    secrets: tuple[str, ...] = ()


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
    step.delivery.secrets = [secret for target in targets for secret in target.secrets]
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
    crashed: BaseException | None = None
    for answers, awaited in _answers(todo, send):
        accepted = False
        for target, answer in answers:
            if isinstance(answer, BaseException):  # a bug, not a provider's answer
                crashed = crashed or answer
                continue
            results[target.id] = _result(target, *answer, remove_dead)
            accepted = accepted or results[target.id]["outcome"] == TargetOutcome.ACCEPTED
        if accepted and awaited:
            _save(step, results)
    if crashed is not None:
        _save(step, results)  # what was accepted stays accepted
        raise crashed
    # In the targets' order (the answers came in any), earlier ones gone since last.
    order = {target.id: index for index, target in enumerate(targets)}
    ranked = sorted(results.items(), key=lambda item: order.get(item[0], len(order)))
    step.delivery.targets = dict(ranked)
    return _outcome([result for _, result in ranked], noun)


Answer = tuple[TargetResult, int] | BaseException


def _answers(
    todo: list[Target], send: SendOne
) -> Iterator[tuple[list[tuple[Target, Answer]], bool]]:
    """The targets' answers - (result, latency in ms), or what the call raised - in
    batches as they come, each with whether more are still awaited. The first target is
    sent in this thread, the others at once from the process's send threads (the
    provider calls overlap; the database is touched in this thread only)."""
    if not todo:
        return
    # The first in this thread while the others are in flight: one thread hop less.
    futures = {_pool().submit(_timed, send, target): target for target in todo[1:]}
    first = (todo[0], _timed(send, todo[0]))
    if not futures:
        yield [first], False
        return
    # Answers that come within SAVE_GRACE_S of the first go with it: no save between.
    done, pending = wait(futures, timeout=SAVE_GRACE_S)
    yield [first, *((futures[future], future.result()) for future in done)], bool(pending)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield [(futures[future], future.result()) for future in done], bool(pending)


def _timed(send: SendOne, target: Target) -> Answer:
    started = time.monotonic()
    try:
        result = send(target)
    except Exception as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
        return exc
    return result, int((time.monotonic() - started) * 1000)


_threads: tuple[int, ThreadPoolExecutor] | None = None
_threads_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's send threads (made again in a forked child: threads do not
    survive a fork)."""
    global _threads
    with _threads_lock:
        if _threads is None or _threads[0] != os.getpid():
            _threads = (os.getpid(), ThreadPoolExecutor(SEND_THREADS, "notifyflow-send"))
        return _threads[1]


def _earlier_results(step: StepContext) -> dict[str, dict[str, Any]]:
    """The delivery's results so far: none when the claim saw no delivery row (no
    read). Not by the attempt number: an operator's retry of a failed instance starts
    it again at 1, and its earlier accepted targets must not be sent to again."""
    if step.delivery.status is None:
        return {}
    saved = (
        Delivery.objects.filter(instance_id=step.instance_id, node_id=step.node_id)
        .values_list("targets", flat=True)
        .first()
    )
    return dict(saved or {})


def _result(
    target: Target, result: TargetResult, latency: int, remove_dead: RemoveDead
) -> dict[str, Any]:
    """The target's entry in the delivery's ``targets`` (and its attempt row): a dead
    one removed, a node's own dead target failed."""
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


_DELIVERY = Delivery._meta
_TABLE = f'"{_DELIVERY.db_table}"'


def _q(name: str) -> str:
    return f'"{_DELIVERY.get_field(name).column}"'  # type: ignore[union-attr]


# The delivery's row with the results so far, marked 'sending': created by the first
# save of an attempt, or updated (a retry's, whose row an earlier attempt wrote), never
# over a 'sent' row; by unique key, prepared (it runs on most steps that send to several
# targets: bench/RESULTS.md, issue 41). Parameters: instance, node, channel, attempts,
# created_at, updated_at, targets.
_SAVE_SQL = (
    f"INSERT INTO {_TABLE} ({_q('instance')}, {_q('node_id')}, {_q('channel')},"
    f" {_q('recipient')}, {_q('status')}, {_q('provider_message_id')}, {_q('output')},"
    f" {_q('attempts')}, {_q('created_at')}, {_q('updated_at')}, {_q('targets')})"
    f" VALUES (%s, %s, %s, '', '{DeliveryStatus.SENDING}', '', '{{}}', %s, %s, %s, %s)"
    f" ON CONFLICT ({_q('instance')}, {_q('node_id')}) DO UPDATE"
    f" SET {_q('status')} = '{DeliveryStatus.SENDING}', {_q('targets')} = excluded.{_q('targets')},"
    f" {_q('attempts')} = CASE WHEN {_TABLE}.{_q('attempts')} > excluded.{_q('attempts')}"
    f" THEN {_TABLE}.{_q('attempts')} ELSE excluded.{_q('attempts')} END,"
    f" {_q('updated_at')} = excluded.{_q('updated_at')}"
    f" WHERE {_TABLE}.{_q('status')} <> '{DeliveryStatus.SENT}'"
)


def _save(step: StepContext, results: Mapping[str, Any]) -> None:
    """The results so far, durably, while the other targets' answers are awaited
    (autocommit: no transaction is open while a step sends). The outcome's record
    writes the row again, with the last answers."""
    instance_id = _DELIVERY.get_field("instance").get_db_prep_value(step.instance_id, connection)
    targets = _DELIVERY.get_field("targets").get_db_prep_value(dict(results), connection)
    now = timezone.now()
    params = [instance_id, step.node_id, step.delivery.channel, step.delivery.attempt]
    with connection.cursor() as cursor:
        db.execute(cursor, _SAVE_SQL, [*params, now, now, targets])


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
        # The first target's (in their order) that the provider gave one.
        "message_id": next((str(r["message_id"]) for r in accepted if r.get("message_id")), ""),
        "sent_at": timezone.now().isoformat(),
    }


def _codes(results: Sequence[Mapping[str, Any]]) -> str:
    """``fcm QUOTA_EXCEEDED, apns 503``: what the providers answered, each once."""
    seen = dict.fromkeys(f"{r.get('provider')} {r.get('code') or r['outcome']}" for r in results)
    return ", ".join(seen)
