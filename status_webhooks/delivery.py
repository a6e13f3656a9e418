"""The deliverer: POST due messages to their endpoints, record every attempt, retry on a
schedule, disable an endpoint that keeps failing.

One pass (``deliver_due``, the task ``notifyflow.deliver_status_webhooks``) claims due
messages in batches: a claim (``store``: one statement on PostgreSQL) takes up to
NOTIFYFLOW_STATUS_WEBHOOK_BATCH pending rows with ``FOR UPDATE SKIP LOCKED``
(concurrent deliverers take different rows) and leases them (``locked_until``,
NOTIFYFLOW_LEASE_S ahead); the POSTs run after commit (``_send_all``), on connections kept
alive per process (``notifyflow.http_client``: no redirect followed, timeouts, verified TLS, bounded
reads); the claim's outcomes are recorded together (one statement on PostgreSQL), each
fenced on its lease. A deliverer killed mid-POST leaves its messages leased: once the
lease runs out the sweeper's kick (or any pass) takes them again and sends the same
``webhook-id`` - delivery is at least once, and the id is how a receiver deduplicates.

2xx is delivered. Anything else - another status (a redirect too), a timeout, a refused
connection, a host no longer allowed - is a failed attempt, retried
``RETRY_SCHEDULE_S[n-1]`` after the n-th failure, then failed for good. An endpoint's
``failing_since`` is its first failure since its last success; five days of that and the
endpoint is disabled (audited, actor ``system``): its pending messages then fail
without a POST until it is enabled and they are replayed.
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from notifyflow import logs, metrics
from notifyflow.celery import send_task_on_commit
from notifyflow.errors import ApplicationError
from notifyflow.http_client import Connections

from . import signing
from .endpoints import url_check
from .models import (
    EndpointChange,
    MessageStatus,
    WebhookAttempt,
    WebhookEndpoint,
    WebhookMessage,
)
from .outbox import DELIVER_TASK
from .store import DELIVERY_STORE, AttemptRecord

logger = logging.getLogger("notifyflow.status_webhooks")

# Waits after the 1st, 2nd, ... failure of a message; after the last one it has failed.
RETRY_SCHEDULE_S = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
# An endpoint whose every attempt failed for this long is disabled.
DISABLE_AFTER = timedelta(days=5)
SYSTEM_ACTOR = "system"
EXCERPT_CHARS = WebhookAttempt._meta.get_field("response_excerpt").max_length or 1000
ERROR_CHARS = WebhookAttempt._meta.get_field("error").max_length or 500
USER_AGENT = "NotifyFlow-Webhooks/1"
# A claim's POSTs still waiting after this long go out at once (``_send_all``).
RAMP_S = 0.05

_pool_lock = threading.Lock()
# This process's kept-alive connections to the endpoints.
CONNECTIONS = Connections()


def timeout_s() -> float:
    """The POST timeout: the setting, capped at half the task's soft time limit."""
    return min(
        settings.NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S,
        settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S / 2,
    )


def retry_delay(failures: int) -> timedelta | None:
    """How long after its ``failures``-th failed attempt a message is tried again; None
    when the schedule is spent (the message has failed)."""
    if failures > len(RETRY_SCHEDULE_S):
        return None
    return timedelta(seconds=RETRY_SCHEDULE_S[failures - 1])


@dataclass(frozen=True)
class Outcome:
    """What one POST gave: a status code (None when no response came), how long it
    took, the start of the response body, an error for anything but 2xx."""

    attempted_at: datetime
    status_code: int | None
    duration_ms: int
    excerpt: str = ""
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def message_body(message: WebhookMessage) -> bytes:
    """The JSON body of a message: ``{id, type, created_at, data}``, the same bytes on
    every attempt."""
    created = message.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    document = {
        "id": str(message.event_id),
        "type": message.type,
        "created_at": created,
        "data": message.data,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signing_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[str]:
    """The endpoint's secret, and its previous one while the rotation overlap lasts."""
    keys = [endpoint.secret]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret and expires is not None and expires > now:
        keys.append(endpoint.previous_secret)
    return keys


# --- claim -----------------------------------------------------------------------------


def messages_claim(*, now: datetime, limit: int) -> list[WebhookMessage]:
    """Lease up to ``limit`` due pending messages (oldest due first) and return them with
    their endpoints. Skips rows another deliverer holds, locked or leased."""
    lease = now + timedelta(seconds=settings.NOTIFYFLOW_LEASE_S)
    return DELIVERY_STORE.claim(now=now, lease=lease, limit=limit)


def due_exists(*, now: datetime) -> bool:
    """Whether some pending message is due and not leased (the sweeper's check)."""
    return (
        WebhookMessage.objects.filter(status=MessageStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now))
        .exists()
    )


# --- send ------------------------------------------------------------------------------


def message_send(message: WebhookMessage) -> Outcome:
    """POST ``message`` to its endpoint (no database access): the URL is checked against
    the allow-list again first, redirects are not followed, and any exception of the
    transport is an outcome, never raised."""
    endpoint = message.endpoint
    attempted_at = timezone.now()
    try:
        url_check(endpoint.url)
    except ApplicationError as exc:
        return Outcome(attempted_at, None, 0, error=exc.message[:ERROR_CHARS])
    body = message_body(message)
    headers = signing.headers(
        signing_secrets=signing_secrets(endpoint, now=attempted_at),
        msg_id=str(message.event_id),
        timestamp=int(time.time()),
        body=body,
    )
    headers["Content-Type"] = "application/json"
    headers["User-Agent"] = USER_AGENT
    started = time.monotonic()
    try:
        response = CONNECTIONS.post(
            endpoint.url,
            body=body,
            headers=headers,
            timeout=timeout_s(),
            max_body=EXCERPT_CHARS * 4,
        )
    except TimeoutError as exc:
        error = f"timeout after {timeout_s():g} s ({type(exc).__name__})"
        return Outcome(attempted_at, None, _ms(started), error=error)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        return Outcome(attempted_at, None, _ms(started), error=error)
    status = response.status
    excerpt = response.body.decode("utf-8", "replace")[:EXCERPT_CHARS]
    error = "" if 200 <= status < 300 else f"HTTP {status}"
    if 300 <= status < 400 and response.location:
        error += f" (redirect to {response.location} not followed)"
    return Outcome(attempted_at, status, _ms(started), excerpt, error[:ERROR_CHARS])


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _threads(size: int) -> ThreadPoolExecutor:
    """One pool per process (made in the worker child, after the fork), a thread per
    message of a claim: a claim takes as long as its slowest POST (at most the timeout),
    whatever the mix of endpoints. Kept between claims: starting threads per claim
    showed in a message's cost (bench/RESULTS.md, issue 28)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < size:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(size, "notifyflow-webhooks"), size
        return _pool


def _send_all(messages: Sequence[WebhookMessage]) -> list[Outcome]:
    """Every message's outcome, in order. The POSTs start one after another on one
    thread; those not started within ``RAMP_S`` (a slow endpoint) go out at once, a
    thread each, so a claim still takes about its slowest POST. Endpoints that answer
    within a millisecond or so are served by that one thread: a thread per message
    cost about a third more CPU per message in GIL handoffs (``bench/RESULTS.md``,
    issue 44, fourth round)."""
    if len(messages) <= 1:
        return [message_send(message) for message in messages]
    outcomes: list[Outcome | None] = [None] * len(messages)
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(messages)):
        todo.put(index)

    def runner() -> None:
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            outcomes[index] = message_send(messages[index])

    pool = _threads(settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH)
    runners = [pool.submit(runner)]
    if not wait(runners, timeout=RAMP_S).done:
        runners += [pool.submit(runner) for _ in range(todo.qsize())]
    for done in runners:
        done.result()  # message_send never raises; a bug would, and shows here
    return [outcome for outcome in outcomes if outcome is not None]


# --- record ----------------------------------------------------------------------------


def outcome_record(*, message: WebhookMessage, outcome: Outcome) -> str:
    """``outcomes_record`` of one message."""
    return outcomes_record(results=[(message, outcome)])[0]


def _attempt_record(message: WebhookMessage, outcome: Outcome, now: datetime) -> AttemptRecord:
    """The attempt's row and the leased ``message``'s next state after ``outcome``:
    delivered, pending again after the schedule's wait, or failed once it is spent."""
    attempts = message.attempts + 1
    status, next_attempt_at = MessageStatus.DELIVERED, message.next_attempt_at
    delivered_at: datetime | None = now
    if not outcome.delivered:
        delay = retry_delay(attempts)
        status = MessageStatus.FAILED if delay is None else MessageStatus.PENDING
        next_attempt_at = message.next_attempt_at if delay is None else now + delay
        delivered_at = None
    return AttemptRecord(
        message_id=message.pk,
        lease=message.locked_until,
        attempted_at=outcome.attempted_at,
        status_code=outcome.status_code,
        duration_ms=outcome.duration_ms,
        excerpt=outcome.excerpt,
        error=outcome.error,
        attempts=attempts,
        status=status,
        next_attempt_at=next_attempt_at,
        delivered_at=delivered_at,
    )


def outcomes_record(*, results: Sequence[tuple[WebhookMessage, Outcome]]) -> list[str]:
    """Record the outcomes of a claim's messages at once, set-based
    (``DELIVERY_STORE.record``): their attempt rows, each message's next state
    (delivered, pending again, or failed) where its lease still holds, and each
    endpoint's health. Returns each message's status, or "" where its lease was lost
    meanwhile (the attempt is recorded; the state belongs to whoever holds the message
    now) or it was deleted with its endpoint."""
    if not results:
        return []
    now = timezone.now()
    records = [_attempt_record(message, outcome, now) for message, outcome in results]
    healthy = {m.endpoint_id for m, o in results if o.delivered}
    held = DELIVERY_STORE.record(records=records, healthy=healthy)
    statuses = {}
    for (message, _), record in zip(results, records, strict=True):
        if record.message_id in held:  # the leased message as it now is
            message.attempts, message.locked_until = record.attempts, None
            message.last_status_code, message.last_error = record.status_code, record.error
            message.status, message.next_attempt_at = record.status, record.next_attempt_at
            message.delivered_at = record.delivered_at
            statuses[message.pk] = record.status
    failing = {m.endpoint_id: m.endpoint for m, _ in results if m.endpoint_id not in healthy}
    for endpoint in failing.values():
        endpoint_failure_record(endpoint=endpoint, now=now)
    for (message, outcome), record in zip(results, records, strict=True):
        _log(message, outcome, statuses.get(message.pk, "lease_lost"), record.attempts)
    return [statuses.get(message.pk, "") for message, _ in results]


def endpoint_failure_record(*, endpoint: WebhookEndpoint, now: datetime) -> bool:
    """Note a failed attempt on ``endpoint``: its first since a success starts
    ``failing_since``; one that comes DISABLE_AFTER later disables the endpoint (audited,
    actor ``system``). Returns whether this call disabled it. Conditional updates, so
    concurrent deliverers disable it once."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk, failing_since__isnull=True).update(
        failing_since=now
    )
    reason = f"every attempt failed for {DISABLE_AFTER.days} days"
    disabled = WebhookEndpoint.objects.filter(
        pk=endpoint.pk, is_active=True, failing_since__lte=now - DISABLE_AFTER
    ).update(is_active=False, disabled_at=now, disabled_reason=reason)
    if disabled:
        EndpointChange.objects.create(
            endpoint_id=endpoint.pk,
            endpoint_url=endpoint.url,
            at=now,
            actor=SYSTEM_ACTOR,
            action="disabled",
            details={"reason": reason},
        )
        metrics.STATUS_WEBHOOK_ENDPOINTS_DISABLED.inc()
        with logs.bound(webhook_endpoint=str(endpoint.pk)):
            logger.warning("status webhook endpoint %s disabled: %s", endpoint.url, reason)
    return bool(disabled)


def _inactive_fail(message: WebhookMessage) -> None:
    """A message of a disabled endpoint fails without a POST (replay sends it again once
    the endpoint is enabled)."""
    WebhookMessage.objects.filter(
        pk=message.pk, status=MessageStatus.PENDING, locked_until=message.locked_until
    ).update(status=MessageStatus.FAILED, locked_until=None, last_error="endpoint is disabled")
    metrics.STATUS_WEBHOOK_MESSAGES.labels("failed").inc()


def _log(message: WebhookMessage, outcome: Outcome, status: str, attempt: int) -> None:
    metrics.STATUS_WEBHOOK_ATTEMPTS.labels("delivered" if outcome.delivered else "failed").inc()
    if status in (MessageStatus.DELIVERED, MessageStatus.FAILED):
        metrics.STATUS_WEBHOOK_MESSAGES.labels(status).inc()
    with logs.bound(
        webhook_id=str(message.event_id),
        webhook_endpoint=str(message.endpoint_id),
        attempt=attempt,
    ):
        what = outcome.status_code or outcome.error
        line = "status webhook %s to %s: %s in %d ms -> %s"
        args = (message.type, message.endpoint.url, what, outcome.duration_ms, status)
        if outcome.delivered:
            # Routine: every attempt is a row (the console, the API) and a metric.
            logger.debug(line, *args)
        else:
            logger.warning(line + " (%s)", *args, outcome.error)


# --- one pass --------------------------------------------------------------------------


def deliver_due(*, max_seconds: float | None = None) -> dict[str, int]:
    """Deliver due messages, batch after batch, until a claim finds fewer than a batch
    due or ``max_seconds`` (default: what the task's soft time limit leaves after one
    more batch) have passed; then kick another pass if some may still be due. A retry
    due within the broker horizon gets a countdown kick; later ones wait for the
    sweeper. Returns counts by outcome."""
    if max_seconds is None:
        max_seconds = max(0.0, settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S - timeout_s() - 2)
    started = time.monotonic()
    counts: Counter[str] = Counter()
    next_retry: datetime | None = None
    limit = settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH
    while True:
        batch = messages_claim(now=timezone.now(), limit=limit)
        if not batch:
            break
        active = [m for m in batch if m.endpoint.is_active]
        for message in batch:
            if not message.endpoint.is_active:
                _inactive_fail(message)
                counts["failed"] += 1
        results = list(zip(active, _send_all(active), strict=True))
        for (message, _), status in zip(results, outcomes_record(results=results), strict=True):
            counts[status or "lease_lost"] += 1
            if status == MessageStatus.PENDING:
                due = message.next_attempt_at
                next_retry = due if next_retry is None else min(next_retry, due)
        if len(batch) < limit:
            # Nothing else was due and free at the claim; what commits later kicks a
            # pass of its own (no empty claim to end each pass).
            break
        if time.monotonic() - started >= max_seconds:
            send_task_on_commit(DELIVER_TASK)  # the rest in a new task, under its limits
            counts["continued"] += 1
            break
    _kick_for_retry(next_retry)
    return dict(counts)


def _kick_for_retry(due: datetime | None) -> None:
    if due is None:
        return
    countdown = max(0.0, (due - timezone.now()).total_seconds())
    if countdown <= settings.NOTIFYFLOW_BROKER_HORIZON_S:
        send_task_on_commit(DELIVER_TASK, countdown=countdown + 0.05)


def pending_backlog() -> tuple[int, int]:
    """(pending messages, of which due now): the /metrics gauges, read through the
    pending-only index."""
    now = timezone.now()
    pending = WebhookMessage.objects.filter(status=MessageStatus.PENDING)
    return pending.count(), pending.filter(next_attempt_at__lte=now).count()
