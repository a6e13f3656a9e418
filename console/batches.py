"""Operator console for batches of batch nodes: open ones first, their
members in arrival order, and a "Flush now" action (the API's flush: the same service)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gates.batches import flush
from gates.models import Batch, BatchCloseReason, BatchItem, BatchStatus
from notifyflow.errors import ApplicationError
from notifyflow.ids import short_id
from triggers.models import TriggerStatusChange

from .support import (
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    can_operate,
    instance_link,
    log_admin_change,
    status_badge,
    timestamp_column,
)
from .visible import visible_id

FLUSH_LIMIT = 100
# The audit reason of an operator's run-now (triggers.state.machine.run_now).
RUN_NOW_AUDIT = "run now by operator"


def close_summary(batch: Batch) -> SafeString | str:
    """How the batch closed, in a few words: the recorded reason, and who flushed it."""
    if batch.status == BatchStatus.OPEN:
        return "-"
    reason = batch.close_reason
    if reason is None and batch.status == BatchStatus.CANCELLED:
        return BatchCloseReason.OPENER_CANCELLED.label  # the one way a batch is cancelled
    if reason is None:
        if batch.max_items is not None and batch.item_count >= batch.max_items:
            return "max_items reached (not recorded: its count says so)"
        return "not recorded (closed before the reason was kept)"
    label = BatchCloseReason(reason).label
    if reason == BatchCloseReason.FLUSH and batch.closed_by:
        return format_html("{} by <strong>{}</strong>", label, visible_id(batch.closed_by))
    return label


def close_details(batch: Batch) -> SafeString | str:
    """``close_summary`` with what the batch page can say more: the window's end, the
    arrival that filled it, the operator whose run-now released the opener."""
    summary = close_summary(batch)
    reason = batch.close_reason
    if reason == BatchCloseReason.WINDOW:
        return format_html("{} (the opener continued at its end)", summary)
    if reason == BatchCloseReason.MAX_ITEMS and batch.max_items is not None:
        filler = (
            BatchItem.objects.filter(batch=batch, seq=batch.max_items)
            .values_list("instance_id", flat=True)
            .first()
        )
        if filler is not None:
            return format_html(
                "{} ({} of {}): the arrival of {} filled it",
                summary,
                batch.item_count,
                batch.max_items,
                instance_link(filler),
            )
    if reason == BatchCloseReason.RUN_NOW:
        operator = (
            TriggerStatusChange.objects.filter(
                instance_id=batch.opener_id, reason__startswith=RUN_NOW_AUDIT
            )
            .order_by("-at", "-id")
            .values_list("actor", flat=True)
            .first()
        )
        if operator:
            return format_html(
                "{} by <strong>{}</strong>, before its window's end", summary, visible_id(operator)
            )
    return summary


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
        "recipient_display",
        "key_display",
        "status_display",
        "item_count",
        "opened",
        "closes",
        "closed_how",
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
        "recipient_display",
        "key_display",
        "status_display",
        "opener_link",
        "item_count",
        "max_items",
        "opened",
        "closes",
        "closed",
        "closed_how_details",
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
    def key_display(self, obj: Batch) -> SafeString:
        return visible_id(obj.key, empty="-")

    @admin.display(description="recipient")
    def recipient_display(self, obj: Batch) -> SafeString:
        return visible_id(obj.recipient_id, empty="-")

    @admin.display(description="closed")
    def closed_how(self, obj: Batch) -> SafeString | str:
        """When it closed, and how (the list has no room for two columns)."""
        if obj.closed_at is None:
            return "-"
        return format_html(
            '{}<div class="nf-closed-how">{}</div>', self.closed(obj), close_summary(obj)
        )

    @admin.display(description="closed how")
    def closed_how_details(self, obj: Batch) -> SafeString | str:
        return close_details(obj)

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
