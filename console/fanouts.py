"""Operator console for list fan-outs: each job's progress, status, workflow
and request key. Read-only: the job advances itself, and cancel by key (the API's
POST /triggers/cancel/) stops it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from notifyflow.ids import short_id
from notifyflow.redaction import redact
from triggers.models.fanouts import FanOut, FanOutStatus

from .support import (
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    parse_uuid,
    pretty_json,
    status_badge,
    timestamp_column,
)
from .visible import visible_id


def progress_bar(obj: FanOut) -> SafeString:
    """``created (+ duplicates) / expected`` with a bar; "reading the lists" before the
    job has read the membership (``expected`` is 0 until then)."""
    done = obj.created + obj.duplicates
    if obj.recipient_ids is None and obj.status == FanOutStatus.RUNNING:
        return format_html('<span class="nf-progress-text">{}</span>', "reading the lists…")
    percent = 100 if not obj.expected else min(100, round(100 * done / obj.expected))
    colour = "#1a7f37" if obj.status == FanOutStatus.DONE else "#0b6bcb"
    if obj.status == FanOutStatus.CANCELLED:
        colour = "#5f6b7a"
    duplicates = f" + {obj.duplicates:,} duplicate(s)" if obj.duplicates else ""
    return format_html(
        '<div class="nf-progress" title="{}%" style="width:10em;height:8px;border-radius:4px;'
        'background:var(--darkened-bg,#eee);overflow:hidden;margin:2px 0">'
        '<div style="width:{}%;height:100%;background:{}"></div></div>'
        '<span class="nf-progress-text">{} created{} of {} expected</span>',
        percent,
        percent,
        colour,
        f"{obj.created:,}",
        duplicates,
        f"{obj.expected:,}",
    )


@admin.register(FanOut)
class FanOutAdmin(LargeTableAdminMixin, LeanChangeListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "short",
        "workflow",
        "idempotency_key_display",
        "status_display",
        "progress",
        "lists_display",
        "started",
        "finished",
    )
    list_display_links = ("short",)
    list_filter = ("status", "workflow")
    list_select_related = ("workflow",)
    # The membership snapshot can be 100,000 ids: never loaded for the list.
    changelist_defer = ("recipient_ids", "payload", "excluded")
    ordering = ("-created_at",)
    sortable_by = ("started",)
    search_fields = ("idempotency_key",)
    search_help_text = "Exact fan-out id (UUID) or exact idempotency key of the trigger request."
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "workflow",
                    "version_display",
                    "idempotency_key_display",
                    "status_display",
                    "progress",
                    "lists_display",
                    "excluded_display",
                    "members_read",
                    "created_by_key",
                    "actor",
                    "started",
                    "updated",
                    "finished",
                    "locked",
                    "instances_link",
                )
            },
        ),
        ("Payload", {"fields": ("payload_json",)}),
    )
    readonly_fields = (
        "version_display",
        "idempotency_key_display",
        "status_display",
        "progress",
        "lists_display",
        "excluded_display",
        "members_read",
        "started",
        "updated",
        "finished",
        "locked",
        "instances_link",
        "payload_json",
    )
    # Not "created": that is the model's count of instances created.
    started = timestamp_column("created_at", "started", sortable=True)
    updated = timestamp_column("updated_at", "updated")
    finished = timestamp_column("finished_at", "finished")
    locked = timestamp_column("locked_until", "held by a worker until")

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: FanOut | None = None,
    ) -> HttpResponse:
        if obj is not None:  # its key as keys are shown (change_form.html), not str(obj)
            context["nf_object_name"] = format_html(
                "{} ({})", visible_id(obj.idempotency_key), obj.status
            )
        return super().render_change_form(
            request, context, add=add, change=change, form_url=form_url, obj=obj
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        as_uuid = parse_uuid(term)
        if as_uuid is not None:
            return queryset.filter(pk=as_uuid), False
        return queryset.filter(idempotency_key=term), False

    @admin.display(description="id", ordering="created_at")
    def short(self, obj: FanOut) -> SafeString:
        return format_html('<code title="{}">{}</code>', obj.pk, short_id(obj.pk))

    @admin.display(description="status")
    def status_display(self, obj: FanOut) -> SafeString:
        return status_badge(obj.status, obj.get_status_display())

    @admin.display(description="progress")
    def progress(self, obj: FanOut) -> SafeString:
        return progress_bar(obj)

    @admin.display(description="idempotency key")
    def idempotency_key_display(self, obj: FanOut) -> SafeString:
        return visible_id(obj.idempotency_key, limit=40)

    @admin.display(description="lists")
    def lists_display(self, obj: FanOut) -> SafeString:
        keys = ((visible_id(key),) for key in obj.lists or [])
        return format_html_join(", ", "<code>{}</code>", keys) or format_html("-")

    @admin.display(description="left out (created by the request itself)")
    def excluded_display(self, obj: FanOut) -> str:
        return f"{len(obj.excluded or []):,} recipient(s)"

    @admin.display(description="membership read")
    def members_read(self, obj: FanOut) -> str:
        if obj.recipient_ids is None:
            return "not yet (the job reads the lists once, when it starts)"
        return f"{len(obj.recipient_ids):,} distinct recipient(s); {obj.position:,} done"

    @admin.display(description="workflow version")
    def version_display(self, obj: FanOut) -> str:
        return f"v{obj.workflow_version.version}"

    @admin.display(description="instances")
    def instances_link(self, obj: FanOut) -> SafeString:
        url = (
            reverse("admin:triggers_triggerinstance_changelist")
            + "?"
            + urlencode({"q": obj.idempotency_key})
        )
        return format_html(
            '<a href="{}">Instances with key <code>{}</code> →</a>',
            url,
            visible_id(obj.idempotency_key),
        )

    @admin.display(description="payload")
    def payload_json(self, obj: FanOut) -> SafeString:
        return pretty_json(redact(obj.payload))
