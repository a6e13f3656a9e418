"""Operator console for batches of batch nodes (SPEC §13): open ones first, their
members in arrival order, and a "Flush now" action (the API's flush: the same service)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow.errors import ApplicationError
from notifyflow.ids import short_id
from triggers.gate_models import Batch, BatchItem
from triggers.gates.batches import flush

from .support import (
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    can_operate,
    instance_link,
    log_admin_change,
    status_badge,
    timestamp_column,
)

FLUSH_LIMIT = 100


class BatchItemInline(admin.TabularInline):
    model = BatchItem
    fields = ("seq", "member", "joined", "member_status")
    readonly_fields = fields
    ordering = ("seq",)
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name = "member"
    verbose_name_plural = "members (arrival order; the first opened the batch)"

    joined = timestamp_column("joined_at", "joined")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .select_related("instance")
            .defer("instance__payload", "instance__vars")
        )

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="instance")
    def member(self, obj: BatchItem) -> SafeString:
        return instance_link(obj.instance_id)

    @admin.display(description="status")
    def member_status(self, obj: BatchItem) -> SafeString:
        return status_badge(obj.instance.status, obj.instance.get_status_display())


@admin.register(Batch)
class BatchAdmin(LargeTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "short",
        "workflow",
        "node_id",
        "recipient_id",
        "key_display",
        "status_display",
        "item_count",
        "opened",
        "closes",
        "closed",
    )
    list_display_links = ("short",)
    list_filter = ("status", "workflow")
    list_select_related = ("workflow",)
    ordering = ("-opened_at",)
    search_fields = ("key", "recipient__id")
    search_help_text = "Batch key or recipient id."
    fields = (
        "id",
        "workflow",
        "node_id",
        "recipient_id",
        "key",
        "status_display",
        "opener_link",
        "item_count",
        "max_items",
        "opened",
        "closes",
        "closed",
    )
    readonly_fields = fields
    inlines = (BatchItemInline,)
    actions = ("flush_now",)

    opened = timestamp_column("opened_at", "opened", sortable=True)
    closes = timestamp_column("closes_at", "closes")
    closed = timestamp_column("closed_at", "closed")

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    @admin.display(description="id", ordering="opened_at")
    def short(self, obj: Batch) -> SafeString:
        return format_html('<code title="{}">{}</code>', obj.pk, short_id(obj.pk))

    @admin.display(description="key")
    def key_display(self, obj: Batch) -> str:
        return obj.key or "-"

    @admin.display(description="status")
    def status_display(self, obj: Batch) -> SafeString:
        return status_badge(obj.status, obj.get_status_display())

    @admin.display(description="opener")
    def opener_link(self, obj: Batch) -> SafeString:
        return instance_link(obj.opener_id)

    @admin.action(description="Flush now (close selected open batches)", permissions=["operate"])
    def flush_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        actor = request.user.get_username()
        done, skipped = [], 0
        for batch_id in queryset.order_by().values_list("pk", flat=True)[:FLUSH_LIMIT]:
            try:
                done.append(flush(batch_id=batch_id, actor=actor))
            except ApplicationError:
                skipped += 1
        log_admin_change(request, done, "Flushed")
        if done:
            self.message_user(request, f"Flushed {len(done)} batch(es): their digests go out now.")
        if skipped:
            self.message_user(request, f"{skipped} batch(es) not open, skipped.", messages.WARNING)
