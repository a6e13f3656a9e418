import logging

from django.conf import settings
from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from executions.views import (
    StepLogListView,
    TriggerDeliveriesView,
    TriggerListView,
    TriggerStepsView,
    TriggerTimelineView,
    WorkflowPreviewView,
    WorkflowStatsView,
    twilio_status_callback,
)
from triggers.event_views import (
    EventReceiveView,
    InstanceEventView,
    WorkflowTriggerDetailView,
    WorkflowTriggerListCreateView,
    WorkflowTriggerPreviewKeyView,
)
from triggers.selectors import queue_figures
from triggers.views import (
    TriggerBulkCreateView,
    TriggerCancelByKeyView,
    TriggerCancelView,
    TriggerDetailView,
    TriggerRetryView,
    TriggerRunNowView,
    WorkflowPauseView,
)
from workflows.views import WorkflowDetailView, WorkflowDiagramView, WorkflowListCreateView

from . import metrics
from .celery import app as celery_app

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
    """``/healthz`` plus the due backlog and the oldest due instance's age, so a load
    balancer or an alert sees a stuck fleet. 503 when the database or the broker is down,
    or when the oldest due instance has waited longer than
    NOTIFYFLOW_READYZ_MAX_DUE_AGE_S (if set)."""
    checks: dict[str, object] = dict(_checks())
    ready = all(v == "ok" for v in checks.values())
    if checks["database"] == "ok":
        figures = queue_figures()
        checks["due_backlog"] = figures.due_backlog
        checks["oldest_due_age_s"] = round(figures.oldest_due_age_s, 3)
        limit = settings.NOTIFYFLOW_READYZ_MAX_DUE_AGE_S
        if limit and figures.oldest_due_age_s > limit:
            ready = False
            checks["queue"] = f"stuck: the oldest due instance has waited over {limit:g} s"
        else:
            checks["queue"] = "ok"
    return JsonResponse(
        {"status": "ok" if ready else "unavailable", **checks}, status=200 if ready else 503
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics (notifyflow.metrics): every process's counters plus the queue
    figures read from the database at scrape time."""
    return metrics.metrics_response(
        request, collectors=[metrics.QueueCollector(lambda: queue_figures())]
    )


api_v1 = [
    # The triggers layer's list + create, with ?recipient= added by executions.
    path("triggers/", TriggerListView.as_view(), name="trigger-list"),
    path("triggers/cancel/", TriggerCancelByKeyView.as_view(), name="trigger-cancel-by-key"),
    path("triggers/bulk/", TriggerBulkCreateView.as_view(), name="trigger-bulk-create"),
    path("triggers/<uuid:id>/", TriggerDetailView.as_view(), name="trigger-detail"),
    path("triggers/<uuid:id>/cancel/", TriggerCancelView.as_view(), name="trigger-cancel"),
    path("triggers/<uuid:id>/events/", InstanceEventView.as_view(), name="trigger-events"),
    path("triggers/<uuid:id>/retry/", TriggerRetryView.as_view(), name="trigger-retry"),
    path("triggers/<uuid:id>/run-now/", TriggerRunNowView.as_view(), name="trigger-run-now"),
    path("triggers/<uuid:id>/steps/", TriggerStepsView.as_view(), name="trigger-steps"),
    path("triggers/<uuid:id>/timeline/", TriggerTimelineView.as_view(), name="trigger-timeline"),
    path(
        "triggers/<uuid:id>/deliveries/",
        TriggerDeliveriesView.as_view(),
        name="trigger-deliveries",
    ),
    path("step-logs/", StepLogListView.as_view(), name="step-log-list"),
    path("workflows/", WorkflowListCreateView.as_view(), name="workflow-list"),
    path("workflows/<slug:key>/", WorkflowDetailView.as_view(), name="workflow-detail"),
    path("workflows/<slug:key>/diagram/", WorkflowDiagramView.as_view(), name="workflow-diagram"),
    path("workflows/<slug:key>/stats/", WorkflowStatsView.as_view(), name="workflow-stats"),
    path(
        "workflows/<slug:key>/preview/",
        WorkflowPreviewView.as_view(),
        name="workflow-preview",
    ),
    path(
        "workflows/<slug:key>/pause/",
        WorkflowPauseView.as_view(pause=True),
        name="workflow-pause",
    ),
    path(
        "workflows/<slug:key>/resume/",
        WorkflowPauseView.as_view(pause=False),
        name="workflow-resume",
    ),
    path("events/", EventReceiveView.as_view(), name="event-receive"),
    path(
        "workflow-triggers/", WorkflowTriggerListCreateView.as_view(), name="workflow-trigger-list"
    ),
    path(
        "workflow-triggers/<int:id>/",
        WorkflowTriggerDetailView.as_view(),
        name="workflow-trigger-detail",
    ),
    path(
        "workflow-triggers/<int:id>/preview-key/",
        WorkflowTriggerPreviewKeyView.as_view(),
        name="workflow-trigger-preview-key",
    ),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # Delivery status (SPEC §11): anymail's tracking webhooks (basic auth / ESP
    # signatures per ANYMAIL settings) and Twilio's signed status callback.
    path("webhooks/anymail/", include("anymail.urls")),
    path("webhooks/twilio/status/", twilio_status_callback, name="twilio-status-callback"),
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler400 = "notifyflow.api_errors.bad_request"
handler404 = "notifyflow.api_errors.not_found"
handler500 = "notifyflow.api_errors.server_error"
