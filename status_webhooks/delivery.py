"""The deliverer: POST due messages to their endpoints, record every attempt, retry on a
schedule, disable an endpoint that keeps failing.

One pass (``deliver_due``, the task ``notifyflow.deliver_status_webhooks``) claims due
messages in batches: a claim (``store``: one statement on PostgreSQL) takes up to
NOTIFYFLOW_STATUS_WEBHOOK_BATCH pending rows with ``FOR UPDATE SKIP LOCKED``
(concurrent deliverers take different rows) and leases them (``locked_until``,
NOTIFYFLOW_LEASE_S ahead); the POSTs run after commit (``messages_send``: up to
``PARALLEL_POSTS`` at once, on one thread), on connections kept alive per process
(``notifyflow.http_client``: no redirect followed, timeouts, verified TLS, bounded
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

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from notifyflow import logs, metrics
from notifyflow.celery import send_task_on_commit
from notifyflow.errors import ApplicationError
from notifyflow.http_client import Connections, Post, Sent

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
# A claim's POSTs in flight at once, each on a kept-alive connection of its own: a
# claim to an endpoint that takes a second per answer still takes seconds, not minutes,
# and no endpoint sees more than this many requests at once from one deliverer.
PARALLEL_POSTS = 8

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
    """POST ``message`` to its endpoint: ``messages_send`` of one."""
    return messages_send([message])[0]


def messages_send(messages: Sequence[WebhookMessage]) -> list[Outcome]:
    """POST each message to its endpoint (no database access) and return the outcomes in
    order: each URL is checked against the allow-list again first, redirects are not
    followed, and any failure of the transport is an outcome, never raised. The POSTs
    go out ``PARALLEL_POSTS`` at a time on one thread (``Connections.post_many``): a
    claim to a quick endpoint costs no thread handoff and waits for no answer before
    the next request is written; one to a slow endpoint takes about one answer per
    ``PARALLEL_POSTS`` messages."""
    attempted_at = timezone.now()
    outcomes: list[Outcome | None] = [None] * len(messages)
    refused: dict[str, str] = {}  # url -> why the allow-list refuses it, checked once
    posts: list[Post] = []
    sent_for: list[int] = []
    for index, message in enumerate(messages):
        url = message.endpoint.url
        if url not in refused:
            try:
                url_check(url)
                refused[url] = ""
            except ApplicationError as exc:
                refused[url] = exc.message[:ERROR_CHARS]
        if refused[url]:
            outcomes[index] = Outcome(attempted_at, None, 0, error=refused[url])
            continue
        posts.append(_post(message, now=attempted_at))
        sent_for.append(index)
    answers = CONNECTIONS.post_many(
        posts, timeout=timeout_s(), max_body=EXCERPT_CHARS * 4, parallel=PARALLEL_POSTS
    )
    for index, sent in zip(sent_for, answers, strict=True):
        outcomes[index] = _outcome(attempted_at, sent)
    return [outcome for outcome in outcomes if outcome is not None]


def _post(message: WebhookMessage, *, now: datetime) -> Post:
    body = message_body(message)
    headers = signing.headers(
        signing_secrets=signing_secrets(message.endpoint, now=now),
        msg_id=str(message.event_id),
        timestamp=int(time.time()),
        body=body,
    )
    headers["Content-Type"] = "application/json"
    headers["User-Agent"] = USER_AGENT
    return Post(message.endpoint.url, body, headers)


def _outcome(attempted_at: datetime, sent: Sent) -> Outcome:
    duration_ms = int(sent.seconds * 1000)
    if isinstance(sent.error, TimeoutError):
        error = f"timeout after {timeout_s():g} s ({type(sent.error).__name__})"
        return Outcome(attempted_at, None, duration_ms, error=error)
    if sent.error is not None or sent.response is None:
        error = f"{type(sent.error).__name__}: {sent.error}"[:ERROR_CHARS]
        return Outcome(attempted_at, None, duration_ms, error=error)
    response = sent.response
    status = response.status
    excerpt = response.body.decode("utf-8", "replace")[:EXCERPT_CHARS]
    error = "" if 200 <= status < 300 else f"HTTP {status}"
    if 300 <= status < 400 and response.location:
        error += f" (redirect to {response.location} not followed)"
    return Outcome(attempted_at, status, duration_ms, excerpt, error[:ERROR_CHARS])


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
        results = list(zip(active, messages_send(active), strict=True))
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
