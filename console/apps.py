from typing import cast

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The operator console: every ModelAdmin, its templates and helpers (no models).

    It sits above the domain apps and calls their services; nothing below imports it.
    """

    name = "console"
    verbose_name = "Operator console"

    def ready(self) -> None:
        from django.contrib import admin
        from django.urls import reverse_lazy

        # The console's lists need the width (README: they fit 1,400 px with the filters
        # open); the navigation sidebar repeats the breadcrumbs and the front page's app list.
        admin.site.enable_nav_sidebar = False
        # The admin's "View site" link: this service has no public site, its API docs are
        # the nearest thing (the stock "/" answers 404). Resolved per request (script prefix).
        admin.site.site_url = cast(str, reverse_lazy("docs"))
