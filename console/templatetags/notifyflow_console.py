"""Template tags of the operator console (admin index overview)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from console.overview import ConsoleOverview, console_overview_get, format_age
from console.support import precise_time
from console.visible import visible_id as visible_id_html

register = template.Library()


@register.simple_tag(takes_context=True)
def console_overview(context: dict[str, Any]) -> ConsoleOverview | None:
    """The queue overview, or None for a user who may not view trigger instances."""
    request = context.get("request")
    if request is None or not request.user.has_perm("triggers.view_triggerinstance"):
        return None
    return console_overview_get()


@register.filter
def age(value: Any) -> str:
    return format_age(value)


@register.filter
def thousands(value: Any) -> str:
    """1234567 -> 1,234,567 (without turning on USE_THOUSAND_SEPARATOR site-wide)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def precise(value: Any) -> str:
    """The console's one timestamp format (console.support.precise_time)."""
    return precise_time(value)


@register.filter
def visible_id(value: Any, limit: Any = None) -> SafeString:
    """An id (or an object's name) with its hidden characters shown
    (``console.visible.visible_id``), cut to ``limit`` characters if given."""
    return visible_id_html(value, limit=int(limit) if limit else None)
