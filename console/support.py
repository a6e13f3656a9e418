"""Shared pieces of the operator console (the Django admin): cheap pagination for huge
tables, a text-input list filter, JSON and status rendering, read-only admins, links to
instances and the admin's LogEntry rows.

Nothing here changes domain state; admin classes call the services for that.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, cast

from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow.db import table_row_estimate
from notifyflow.ids import short_id

from .visible import visible_id

# The permission behind "retry" and "run now". It is not declared in any model's Meta:
# workflows/migrations/0002_operators_group.py creates the row on TriggerInstance's
# content type, so ModelBackend resolves it like any other "triggers.*" permission.
OPERATE_PERMISSION = "triggers.operate_triggerinstance"

STATUS_COLOURS = {
    "enqueued": "#0b6bcb",
    "processing": "#b35c00",
    "completed": "#1a7f37",
    "failed": "#c62828",
    "waiting": "#6b4fbb",
    "cancelled": "#5f6b7a",
    # A test send's badge next to its status.
    "test": "#a4267a",
    "sending": "#b35c00",
    "sent": "#1a7f37",
    "skipped": "#8a6d00",
    "running": "#0b6bcb",
    "done": "#1a7f37",
    # A push or chat delivery's targets.
    "accepted": "#1a7f37",
    "dead": "#5f6b7a",
    "retry": "#b35c00",
}


def can_operate(request: HttpRequest) -> bool:
    return request.user.has_perm(OPERATE_PERMISSION)


def status_badge(status: str, label: str | None = None) -> SafeString:
    colour = STATUS_COLOURS.get(status, "#555")
    return format_html(
        '<span class="nf-status nf-status-{}" style="display:inline-block;padding:1px 8px;'
        'border-radius:9px;color:#fff;background:{};font-weight:600;font-size:11px">{}</span>',
        status,
        colour,
        label or status,
    )


def pretty_json(value: Any) -> SafeString:
    """Indented, key-sorted JSON inside <pre>, HTML-escaped."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)
    return format_html(
        '<pre class="nf-json" style="white-space:pre-wrap;max-height:28em;overflow:auto;'
        'margin:0;padding:6px 8px;font-size:12px;background:var(--darkened-bg,#f8f8f8)">'
        "{}</pre>",
        text,
    )


class EstimatedCountPaginator(Paginator):
    """A paginator that never runs an unbounded COUNT(*) on a big table.

    An exact count of a million-row table is a full scan on every page load. Instead:
    unfiltered on PostgreSQL, the planner's estimate from pg_class.reltuples (exact
    COUNT only below ``exact_below`` rows, where it is cheap); filtered, a count that
    stops at ``count_cap`` rows (``SELECT COUNT(*) FROM (... LIMIT cap+1)``), so a
    filter that matches most of the table still costs at most cap index entries.
    ``count_is_estimate`` / ``count_is_capped`` tell the template to say so.
    """

    exact_below = 10_000
    # 20 pages of 50: past that, operators narrow the filter rather than page.
    count_cap = 1_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count_is_estimate = False
        self.count_is_capped = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        if not queryset.query.where:
            estimate = table_row_estimate(queryset.model, queryset.db)
            if estimate is not None and estimate >= self.exact_below:
                self.count_is_estimate = True
                return estimate
            return queryset.count()
        bounded = queryset.order_by()[: self.count_cap + 1].count()
        if bounded > self.count_cap:
            self.count_is_capped = True
            return self.count_cap
        return bounded


class LargeTableAdminMixin:
    """For admins over tables that grow without bound (instances, logs, audit rows)."""

    paginator: type[Paginator] = EstimatedCountPaginator
    show_full_result_count = False
    # Facet counts are one COUNT per filter choice on every page load.
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50


class ReadOnlyAdminMixin:
    """Append-only history: nobody edits or deletes it here, superusers included."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class InputListFilter(admin.SimpleListFilter):
    """A list filter that is a text box: exact match on ``field_path``.

    For columns with too many distinct values to list (node ids on a log table), where
    listing the choices would itself be a DISTINCT over the whole table. Subclasses set
    ``title``, ``parameter_name`` and ``field_path``.
    """

    template = "admin/notifyflow/input_filter.html"
    field_path = ""

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        # Non-empty, or Django does not render the filter at all.
        return [("", "")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = (self.value() or "").strip()
        if value:
            return queryset.filter(**{self.field_path: value})
        return queryset

    def choices(self, changelist: Any) -> Any:
        yield {
            "selected": bool(self.value()),
            "value": self.value() or "",
            "parameter_name": self.parameter_name,
            "other_params": [
                (key, value)
                for key, value in changelist.params.items()
                if key != self.parameter_name
            ],
            "clear_query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": self.value() or "",
        }


class NodeIdFilter(InputListFilter):
    title = "node id"
    parameter_name = "node_id"
    field_path = "node_id"


class LeanChangeListMixin:
    """Defers ``changelist_defer`` columns (big JSON) on the changelist only; the change
    page still loads them."""

    changelist_defer: tuple[str, ...] = ()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        defer = self.changelist_defer

        class LeanChangeList(ChangeList):
            def get_queryset(
                self, request: HttpRequest, exclude_parameters: Any = None
            ) -> QuerySet:
                queryset = super().get_queryset(request, exclude_parameters)
                return queryset.defer(*defer) if defer else queryset

        return LeanChangeList


def precise_time(value: datetime | None) -> str:
    """The console's one timestamp format: ``2026-11-23 19:31:52.123 UTC`` (operators
    correlate steps seconds apart; the stock format stops at minutes, and says no zone)."""
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return local.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + f" {local.tzname()}"


def relative_age(seconds: float) -> str:
    """``2d 3h``, ``4h 05m``, ``4m 05s``, ``12s`` (whole units, never negative)."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def waiting_until(value: datetime | None, now: datetime | None = None) -> SafeString | None:
    """``in 12d 3h until 2026-12-05 10:00:00.000 UTC`` (relative, then absolute with the
    zone) for a future ``value``; None when it is not in the future."""
    now = now or timezone.now()
    if value is None or value <= now:
        return None
    at = precise_time(value)
    date, _, time = at.partition(" ")
    return format_html(
        '<span class="nf-waiting" title="waiting until {}"><span class="nf-rel">in {}</span> '
        '<span class="nf-ts">until <span>{}</span> <span>{}</span></span></span>',
        at,
        relative_age((value - now).total_seconds()),
        date,
        time,
    )


def truncated(text: str, limit: int = 60, *, full: str | None = None) -> SafeString | str:
    """Long text cut to ``limit`` characters (and two lines, console.css) in a list;
    the full text (``full``, default ``text``) on hover."""
    if not text:
        return "-"
    short = text if len(text) <= limit else text[: limit - 1] + "…"
    return format_html('<span class="nf-trunc" title="{}">{}</span>', full or text, short)


def timestamp_column(
    field_name: str, description: str | None = None, *, sortable: bool = False
) -> Callable[[Any, Model], SafeString | str]:
    """A ModelAdmin display method showing ``field_name`` to the millisecond."""

    @admin.display(
        description=description or field_name.replace("_", " "),
        ordering=field_name if sortable else None,
    )
    def column(model_admin: Any, obj: Model) -> SafeString | str:
        text = precise_time(getattr(obj, field_name))
        date, _, time = text.partition(" ")
        if not time:
            return text
        # Date and time each on one line; a narrow column wraps between them.
        return format_html('<span class="nf-ts"><span>{}</span> <span>{}</span></span>', date, time)

    return column


def parse_uuid(term: str) -> uuid.UUID | None:
    """``term`` as a UUID, or None: admin searches match ids exactly (an index lookup)."""
    try:
        return uuid.UUID(term.strip())
    except ValueError:
        return None


def instance_link(instance_id: uuid.UUID | str) -> SafeString:
    """The instance's short id, linking to its console page."""
    url = reverse("admin:triggers_triggerinstance_change", args=[quote(instance_id)])
    return format_html('<a href="{}"><code>{}</code></a>', url, short_id(instance_id))


def recipient_link(recipient_id: str | None, *, empty: str = "-") -> SafeString:
    """The recipient's id (hidden characters shown: ``visible_id``), linking to their
    console page; ``empty`` without one."""
    if recipient_id is None or recipient_id == "":
        return format_html("{}", empty)
    url = reverse("admin:recipients_recipient_change", args=[quote(recipient_id)])
    return format_html('<a href="{}">{}</a>', url, visible_id(recipient_id))


def log_admin_change(request: HttpRequest, objects: Iterable[Model], message: str) -> None:
    """One "changed" LogEntry per object, so the admin's "Recent actions" and the
    object history show what an operator did (the status audit has the details)."""
    objects = list(objects)
    # Only logged-in staff reach the admin's views and actions.
    user_id = cast(int, request.user.pk)
    if len(objects) == 1:
        LogEntry.objects.log_actions(
            user_id=user_id,
            queryset=objects,
            action_flag=CHANGE,
            change_message=message,
            single_object=True,
        )
    elif objects:
        LogEntry.objects.log_actions(
            user_id=user_id, queryset=objects, action_flag=CHANGE, change_message=message
        )
