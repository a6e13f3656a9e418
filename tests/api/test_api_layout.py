"""Where the API's views live: every endpoint is served from the api app, and no view
inherits another resource's view (a shared behaviour is a base in api.base)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

# Not the API's: the console (admin/), anymail's tracking webhooks, drf-spectacular's
# schema and docs pages.
THIRD_PARTY = ("anymail.", "drf_spectacular.")


def _views(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            callback = pattern.callback
            yield prefix + str(pattern.pattern), getattr(callback, "view_class", callback)


def _project_views() -> list[tuple[str, Any]]:
    return [
        (route, view)
        for route, view in _views(get_resolver().url_patterns)
        if not route.startswith("admin/") and not view.__module__.startswith(THIRD_PARTY)
    ]


def test_every_endpoint_is_served_by_a_view_of_the_api_app():
    views = _project_views()
    assert len(views) > 25  # the whole API, not an empty resolver
    elsewhere = [(r, v.__module__) for r, v in views if not v.__module__.startswith("api.views.")]
    assert elsewhere == []


def test_no_view_inherits_the_view_of_another_resource():
    borrowed = []
    for route, view in _project_views():
        if not isinstance(view, type):
            continue
        for base in view.__mro__[1:]:
            if not issubclass(base, APIView) or base.__module__.startswith("rest_framework."):
                continue
            if base.__module__ not in (view.__module__, "api.base"):
                borrowed.append((route, view.__name__, f"{base.__module__}.{base.__name__}"))
    assert borrowed == []
