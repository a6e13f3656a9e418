from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from executions.views import StepLogListView, TriggerListView, TriggerStepsView
from triggers.event_views import (
    EventReceiveView,
    WorkflowTriggerDetailView,
    WorkflowTriggerListCreateView,
    WorkflowTriggerPreviewKeyView,
)
from triggers.views import (
    TriggerCancelByKeyView,
    TriggerCancelView,
    TriggerDetailView,
    WorkflowPauseView,
)
from workflows.views import WorkflowDetailView, WorkflowListCreateView

from .celery import app as celery_app


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer; 503 naming the one that does not."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
        checks["database"] = f"error: {exc.__class__.__name__}: {exc}"
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["broker"] = f"error: {exc.__class__.__name__}: {exc}"
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", **checks}, status=200 if healthy else 503
    )


# The console's lists need the width (README: they fit 1,400 px with the filters open);
# the navigation sidebar repeats the breadcrumbs and the front page's app list.
admin.site.enable_nav_sidebar = False

api_v1 = [
    # The triggers layer's list + create, with ?recipient= added by executions.
    path("triggers/", TriggerListView.as_view(), name="trigger-list"),
    path("triggers/cancel/", TriggerCancelByKeyView.as_view(), name="trigger-cancel-by-key"),
    path("triggers/<uuid:id>/", TriggerDetailView.as_view(), name="trigger-detail"),
    path("triggers/<uuid:id>/cancel/", TriggerCancelView.as_view(), name="trigger-cancel"),
    path("triggers/<uuid:id>/steps/", TriggerStepsView.as_view(), name="trigger-steps"),
    path("step-logs/", StepLogListView.as_view(), name="step-log-list"),
    path("workflows/", WorkflowListCreateView.as_view(), name="workflow-list"),
    path("workflows/<slug:key>/", WorkflowDetailView.as_view(), name="workflow-detail"),
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
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler404 = "notifyflow.api_errors.not_found"
handler500 = "notifyflow.api_errors.server_error"
