"""The deliverer: POST due messages to their endpoints, record every attempt, retry on a
schedule, disable an endpoint that keeps failing.

One pass (``deliver_due``, the task ``notifyflow.deliver_status_webhooks``) claims due
messages in batches: a short transaction takes up to NOTIFYFLOW_STATUS_WEBHOOK_BATCH
pending rows with ``FOR UPDATE SKIP LOCKED`` (concurrent deliverers take different
rows) and leases them (``locked_until``, NOTIFYFLOW_LEASE_S ahead); the POSTs run after
commit, at once, on a keep-alive client that follows no redirect; each outcome is
recorded in a short transaction of its own, fenced on the lease. A deliverer killed
mid-POST leaves its messages leased: once the lease runs out the sweeper's kick (or any
pass) takes them again and sends the same ``webhook-id`` - delivery is at least once,
and the id is how a receiver deduplicates.

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
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notifyflow import logs, metrics
from notifyflow.celery import send_task_on_commit
from notifyflow.errors import ApplicationError

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

logger = logging.getLogger("notifyflow.status_webhooks")

# Waits after the 1st, 2nd, ... failure of a message; after the last one it has failed.
RETRY_SCHEDULE_S = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
# An endpoint whose every attempt failed for this long is disabled.
DISABLE_AFTER = timedelta(days=5)
SYSTEM_ACTOR = "system"
EXCERPT_CHARS = WebhookAttempt._meta.get_field("response_excerpt").max_length or 1000
ERROR_CHARS = WebhookAttempt._meta.get_field("error").max_length or 500
USER_AGENT = "NotifyFlow-Webhooks/1"

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _http() -> httpx.Client:
    """One keep-alive client per process (created in the worker child, after the fork):
    no redirects, no proxy or certificate settings from the environment."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(
                follow_redirects=False,
                trust_env=False,
                headers={"User-Agent": USER_AGENT},
                # As many kept-alive connections as a claim has threads: each POST reuses one.
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
            )
        return _client


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
    free = Q(locked_until__isnull=True) | Q(locked_until__lte=now)
    with transaction.atomic():
        # Walks webhook_message_due (pending by next_attempt_at).
        ids = list(
            WebhookMessage.objects.select_for_update(skip_locked=True)
            .filter(free, status=MessageStatus.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:limit]
        )
        if not ids:
            return []
        # The same conditions again: on SQLite (no row locks) a second deliverer may have
        # read the same ids, and whoever writes first holds them.
        WebhookMessage.objects.filter(free, pk__in=ids, status=MessageStatus.PENDING).update(
            locked_until=lease
        )
    return list(
        WebhookMessage.objects.filter(pk__in=ids, locked_until=lease).select_related("endpoint")
    )


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
    started = time.monotonic()
    try:
        with _http().stream(
            "POST", endpoint.url, content=body, headers=headers, timeout=timeout_s()
        ) as response:
            excerpt = _read_excerpt(response)
    except httpx.TimeoutException as exc:
        error = f"timeout after {timeout_s():g} s ({type(exc).__name__})"
        return Outcome(attempted_at, None, _ms(started), error=error)
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        return Outcome(attempted_at, None, _ms(started), error=error)
    status = response.status_code
    error = "" if 200 <= status < 300 else f"HTTP {status}"
    if 300 <= status < 400 and response.headers.get("location"):
        error += f" (redirect to {response.headers['location']} not followed)"
    return Outcome(attempted_at, status, _ms(started), excerpt, error[:ERROR_CHARS])


def _read_excerpt(response: httpx.Response) -> str:
    """The start of the body, reading no more than the excerpt needs."""
    raw = b""
    for chunk in response.iter_raw():
        raw += chunk
        if len(raw) >= EXCERPT_CHARS * 4:
            break
    return raw.decode("utf-8", "replace")[:EXCERPT_CHARS]


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
    with _client_lock:
        if _pool is None or _pool_size < size:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(size, "notifyflow-webhooks"), size
        return _pool


def _send_all(messages: Sequence[WebhookMessage]) -> list[Outcome]:
    if len(messages) <= 1:
        return [message_send(message) for message in messages]
    return list(_threads(settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH).map(message_send, messages))


# --- record ----------------------------------------------------------------------------


def outcome_record(*, message: WebhookMessage, outcome: Outcome) -> str:
    """``outcomes_record`` of one message."""
    return outcomes_record(results=[(message, outcome)])[0]


def _next_state(message: WebhookMessage, outcome: Outcome, now: datetime) -> str:
    """Set the leased ``message``'s fields after ``outcome``; returns its status."""
    message.attempts += 1
    message.locked_until = None
    message.last_status_code = outcome.status_code
    message.last_error = outcome.error
    if outcome.delivered:
        message.status, message.delivered_at = MessageStatus.DELIVERED, now
        return message.status
    delay = retry_delay(message.attempts)
    message.status = MessageStatus.FAILED if delay is None else MessageStatus.PENDING
    if delay is not None:
        message.next_attempt_at = now + delay
    return message.status


_OUTCOME_FIELDS = (
    "attempts",
    "locked_until",
    "last_status_code",
    "last_error",
    "status",
    "delivered_at",
    "next_attempt_at",
)


def _messages_update(messages: Sequence[WebhookMessage]) -> None:
    """Write the messages' new states: one UPDATE per distinct state (a claim's are
    mostly alike: delivered with a 200), not ``bulk_update``'s CASE per row and field,
    whose compilation was most of a message's cost (bench/RESULTS.md, issue 28)."""
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for message in messages:
        groups[tuple(getattr(message, name) for name in _OUTCOME_FIELDS)].append(message.pk)
    for values, pks in groups.items():
        WebhookMessage.objects.filter(pk__in=pks).update(
            **dict(zip(_OUTCOME_FIELDS, values, strict=True))
        )


def outcomes_record(*, results: Sequence[tuple[WebhookMessage, Outcome]]) -> list[str]:
    """Record the outcomes of a claim's messages in one transaction, set-based: their
    attempt rows, each message's next state (delivered, pending again, or failed) where
    its lease still holds, and each endpoint's health. Returns each message's status,
    or "" where its lease was lost meanwhile (the attempt is recorded; the state belongs
    to whoever holds the message now) or it was deleted with its endpoint."""
    now = timezone.now()
    attempt = {m.pk: m.attempts + 1 for m, _ in results}
    with transaction.atomic():
        # Locks the rows, so a replay or a second deliverer waits for this record.
        rows = (
            WebhookMessage.objects.select_for_update()
            .filter(pk__in=list(attempt))
            .values_list("pk", "locked_until", "status")
        )
        existing = {pk for pk, _, _ in rows}
        leased = {pk: lease for pk, lease, status in rows if status == MessageStatus.PENDING}
        held = [m for m, _ in results if m.pk in leased and leased[m.pk] == m.locked_until]
        outcomes = {m.pk: o for m, o in results}
        statuses = {m.pk: _next_state(m, outcomes[m.pk], now) for m in held}
        _messages_update(held)
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(
                message_id=message.pk,
                attempted_at=outcome.attempted_at,
                status_code=outcome.status_code,
                duration_ms=outcome.duration_ms,
                response_excerpt=outcome.excerpt,
                error=outcome.error,
            )
            for message, outcome in results
            if message.pk in existing
        )
        _endpoints_health(results, now)
    for message, outcome in results:
        _log(message, outcome, statuses.get(message.pk, "lease_lost"), attempt[message.pk])
    return [statuses.get(message.pk, "") for message, _ in results]


def _endpoints_health(results: Sequence[tuple[WebhookMessage, Outcome]], now: datetime) -> None:
    """An endpoint with a delivered message in the claim is healthy again; one whose
    every attempt failed notes the failure (and may be disabled)."""
    endpoints = {m.endpoint_id: m.endpoint for m, _ in results}
    healthy = {m.endpoint_id for m, o in results if o.delivered}
    if healthy:
        WebhookEndpoint.objects.filter(pk__in=healthy, failing_since__isnull=False).update(
            failing_since=None
        )
    for endpoint_id in endpoints.keys() - healthy:
        endpoint_failure_record(endpoint=endpoints[endpoint_id], now=now)


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
    """Deliver due messages, batch after batch, until none is due or ``max_seconds``
    (default: what the task's soft time limit leaves after one more batch) have passed;
    then kick another pass if some are still due. A retry due within the broker horizon
    gets a countdown kick; later ones wait for the sweeper. Returns counts by outcome."""
    if max_seconds is None:
        max_seconds = max(0.0, settings.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S - timeout_s() - 2)
    started = time.monotonic()
    counts: Counter[str] = Counter()
    next_retry: datetime | None = None
    while True:
        batch = messages_claim(now=timezone.now(), limit=settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH)
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
