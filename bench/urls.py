"""The project's URLs plus the reference endpoint (only in bench runs)."""

from django.urls import path

from bench.reference_app.views import RefTriggerView
from notifyflow.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("bench/ref/triggers/", RefTriggerView.as_view(), name="bench-ref-trigger"),
]
