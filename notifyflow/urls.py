"""The composition root: the admin and the API app's URLs (``api.urls``). The only
module of ``notifyflow`` that imports the apps above it."""

from django.contrib import admin
from django.urls import include, path

from api import urls as api_urls
from api.views.unsubscribe import unsubscribe

urlpatterns = [
    path("admin/", admin.site.urls),
    # One-click unsubscribe links of emails (SPEC §12): recipients.unsubscribe builds them.
    path("u/<str:token>/", unsubscribe, name="unsubscribe"),
    path("", include(api_urls)),
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler400 = "notifyflow.api_errors.bad_request"
handler404 = "notifyflow.api_errors.not_found"
handler500 = "notifyflow.api_errors.server_error"
