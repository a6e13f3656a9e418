"""The composition root: the admin and the API app's URLs (``api.urls``). The only
module of ``notifyflow`` that imports the apps above it."""

from django.contrib import admin
from django.urls import include, path

from api import urls as api_urls

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include(api_urls)),
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler400 = "notifyflow.api_errors.bad_request"
handler404 = "notifyflow.api_errors.not_found"
handler500 = "notifyflow.api_errors.server_error"
