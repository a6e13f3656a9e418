"""The composition root: the admin and the API app's URLs (``api.urls``). The only
module of ``notifyflow`` that imports the apps above it."""

from django.contrib import admin
from django.urls import include, path

from api import urls as api_urls
from api.views.unsubscribe import unsubscribe

urlpatterns = [
    path("admin/", admin.site.urls),
    # One-click unsubscribe links of emails (RFC 8058): recipients.unsubscribe builds them.
    path("u/<str:token>/", unsubscribe, name="unsubscribe"),
    path("", include(api_urls)),
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler400 = "api.errors.bad_request"
handler404 = "api.errors.not_found"
handler500 = "api.errors.server_error"
