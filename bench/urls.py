"""The project's URLs plus the reference endpoint (only in bench runs)."""

from django.urls import path

from bench.reference_app.views import RefBulkView, RefConstantView, RefTriggerView
from notifyflow.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    *project_urlpatterns,
    path("bench/ref/triggers/", RefTriggerView.as_view(), name="bench-ref-trigger"),
    path("bench/ref/triggers/bulk/", RefBulkView.as_view(), name="bench-ref-trigger-bulk"),
    path("bench/ref/constant/", RefConstantView.as_view(), name="bench-ref-constant"),
]
