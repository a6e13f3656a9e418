"""The composition root: the admin and the API app's URLs (``api.urls``). The only
module of ``notifyflow`` that imports the apps above it."""

from typing import cast

from django.contrib import admin
from django.urls import include, path, reverse_lazy

from api import urls as api_urls

# The console's lists need the width (README: they fit 1,400 px with the filters open);
# the navigation sidebar repeats the breadcrumbs and the front page's app list.
admin.site.enable_nav_sidebar = False
# The admin's "View site" link: this service has no public site, its API docs are the
# nearest thing (the stock "/" answers 404).
admin.site.site_url = cast(str, reverse_lazy("docs"))  # resolved per request (script prefix)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include(api_urls)),
]

# Under /api/ a 404 or 500 answers the API's error shape as JSON, never an HTML page.
handler400 = "notifyflow.api_errors.bad_request"
handler404 = "notifyflow.api_errors.not_found"
handler500 = "notifyflow.api_errors.server_error"
