"""Operator console for throttle counters: each key's hits in its window now,
its limit and window, when it has room, and a "Reset" action (the API's DELETE
/api/v1/throttles/: the same service). Counters are written by the throttle nodes only:
nobody adds or edits one here."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gates.models import ThrottleCounter, ThrottleScope
from gates.throttles import throttle_reset, throttle_state

from .support import (
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    can_operate,
    log_admin_change,
    precise_time,
    timestamp_column,
)
from .visible import visible_id


def reset_counter(counter: ThrottleCounter) -> int:
    """``throttle_reset`` of exactly this counter's scope, subject and key."""
    if counter.scope == ThrottleScope.WORKFLOW and ":" in counter.subject:
        workflow, node = counter.subject.split(":", 1)
        return throttle_reset(scope=counter.scope, key=counter.key, workflow=workflow, node=node)
    return throttle_reset(scope=counter.scope, key=counter.key, recipient=counter.subject)


@admin.register(ThrottleCounter)
class ThrottleCounterAdmin(LargeTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("subject_display", "scope", "key_display", "in_window", "room", "updated")
    list_display_links = ("subject_display",)
    list_filter = ("scope",)
    # The unique (scope, subject, key) index serves an exact subject; newest rows first.
    ordering = ("-id",)
    sortable_by = ()
    search_fields = ("subject",)
    search_help_text = 'Exact subject: "<workflow key>:<node id>" or a recipient id.'
    actions = ("reset",)
    fields = ("scope", "subject_display", "key_display", "in_window", "oldest", "room", "updated")
    readonly_fields = fields
    updated = timestamp_column("updated_at", "updated")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        return (queryset.filter(subject=term) if term else queryset), False

    @admin.display(description="subject")
    def subject_display(self, obj: ThrottleCounter) -> SafeString:
        return visible_id(obj.subject)

    @admin.display(description="key")
    def key_display(self, obj: ThrottleCounter) -> SafeString:
        if not obj.key:
            return format_html("<em>{}</em>", "(none)")
        return format_html("<code>{}</code>", visible_id(obj.key))

    @admin.display(description="in window")
    def in_window(self, obj: ThrottleCounter) -> str:
        count = throttle_state(obj, now=timezone.now()).count
        return f"{count:,} of {obj.limit:,} in {timedelta(milliseconds=obj.window_ms)}"

    @admin.display(description="oldest hit in window")
    def oldest(self, obj: ThrottleCounter) -> str:
        return precise_time(throttle_state(obj, now=timezone.now()).oldest_hit)

    @admin.display(description="room")
    def room(self, obj: ThrottleCounter) -> str:
        now = timezone.now()
        next_room = throttle_state(obj, now=now).next_room_at
        return "now" if next_room <= now else f"at {precise_time(next_room)}"

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    @admin.action(
        description="Reset selected throttle keys (room at once)", permissions=["operate"]
    )
    def reset(self, request: HttpRequest, queryset: QuerySet) -> None:
        counters = list(queryset)
        log_admin_change(request, counters, "Reset")
        reset = sum(reset_counter(counter) for counter in counters)
        self.message_user(request, f"Reset {reset} throttle key(s).", messages.SUCCESS)
