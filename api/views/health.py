"""Liveness, readiness and metrics for load balancers and Prometheus: plain Django views
(no API key), here because readiness reads the queue (``triggers.selectors``)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from notifyflow import metrics
from notifyflow.celery import app as celery_app
from status_webhooks.delivery import pending_backlog
from triggers.checks import autovacuum_warnings
from triggers.selectors import queue_figures

logger = logging.getLogger("notifyflow.health")


def _checks() -> dict[str, str]:
    """Database and broker, each "ok" or "fail": driver errors (hosts, ports, users) go
    to the log, not to the unauthenticated caller."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:  # noqa: BLE001 - any failure means unhealthy
        logger.exception("healthz: database check failed")
        checks["database"] = "fail"
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception:  # noqa: BLE001
        logger.exception("healthz: broker check failed")
        checks["broker"] = "fail"
    return checks


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer; 503 naming the one that does not."""
    checks = _checks()
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503
    )


def readyz(request: HttpRequest) -> JsonResponse:
    """``/healthz`` plus the due backlog and the oldest due instance's age, in all and
    per lane (``lanes``), so a load balancer or an alert sees a stuck fleet. 503 when
    the database or the broker is down, or when the oldest due instance has waited
    longer than NOTIFYFLOW_READYZ_MAX_DUE_AGE_S (if set).

    On PostgreSQL, ``autovacuum`` is "ok" or "warning: ..." naming what the queue table
    lacks (``triggers.checks``: the server's autovacuum off, its per-table settings
    missing): a warning for an operator, never a reason to take the node out."""
    checks: dict[str, object] = dict(_checks())
    ready = all(v == "ok" for v in checks.values())
    if checks["database"] == "ok":
        figures = queue_figures()
        checks["due_backlog"] = figures.due_backlog
        checks["oldest_due_age_s"] = round(figures.oldest_due_age_s, 3)
        checks["lanes"] = {
            lane: {
                "due_backlog": lane_figures.due_backlog,
                "oldest_due_age_s": round(lane_figures.oldest_due_age_s, 3),
            }
            for lane, lane_figures in figures.lanes.items()
        }
        limit = settings.NOTIFYFLOW_READYZ_MAX_DUE_AGE_S
        if limit and figures.oldest_due_age_s > limit:
            ready = False
            checks["queue"] = f"stuck: the oldest due instance has waited over {limit:g} s"
        else:
            checks["queue"] = "ok"
        warnings = autovacuum_warnings()
        if warnings is not None:
            checks["autovacuum"] = ("warning: " + "; ".join(warnings)) if warnings else "ok"
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", **checks}, status=200 if ready else 503
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics (notifyflow.metrics): every process's counters plus the queue
    figures and the status webhook backlog read from the database at scrape time."""
    return metrics.metrics_response(
        request,
        collectors=[
            metrics.QueueCollector(lambda: queue_figures()),
            metrics.BacklogCollector(pending_backlog),
        ],
    )
