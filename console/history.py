"""Operator console for execution history: step logs, deliveries (with their provider
attempts and status events) and the status audit of trigger instances.

All of it is history: read-only for everyone, superusers included. Each list is newest
first by primary key, searched by exact values only (index lookups), never counted
exactly (LargeTableAdminMixin).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib import admin
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from executions.models import (
    Delivery,
    DeliveryAttempt,
    DeliveryEvent,
    SkipReason,
    StepExecutionLog,
    looks_like_recipient,
    normalize_recipient,
)
from notifyflow.redaction import redact
from triggers.models import TriggerStatusChange
from workflows.definition import node_types

from .instances.inlines import run_label, skip_rule, step_locale, step_outcome
from .support import (
    LargeTableAdminMixin,
    LeanChangeListMixin,
    NodeIdFilter,
    ReadOnlyAdminMixin,
    instance_link,
    parse_uuid,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)
from .visible import visible_id


class NodeTypeFilter(admin.SimpleListFilter):
    """Fixed choices: the stock filter would run a DISTINCT over the whole log table."""

    title = "node type"
    parameter_name = "node_type"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [(kind, kind) for kind in (*node_types.names(), "unknown")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(node_type=self.value()) if self.value() else queryset


class ErrorKindFilter(admin.SimpleListFilter):
    title = "error kind"
    parameter_name = "error_kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        kinds = ("transient", "permanent", "deferred", "lease_expired", "lease_lost")
        return [(kind, kind) for kind in kinds]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(error_kind=self.value()) if self.value() else queryset


class SkipReasonFilter(admin.SimpleListFilter):
    """Steps that succeeded without sending, by reason (the partial index
    steplog_skipped holds only them)."""

    title = "skipped"
    parameter_name = "skip_reason"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("any", "any reason"), *SkipReason.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "any":
            return queryset.exclude(skip_reason="")
        return queryset.filter(skip_reason=self.value()) if self.value() else queryset


class ChannelFilter(admin.SimpleListFilter):
    title = "channel"
    parameter_name = "channel"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("email", "email"), ("sms", "sms"), ("webhook", "webhook")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(channel=self.value()) if self.value() else queryset


def _search_by_instance(queryset: QuerySet, search_term: str, field: str) -> tuple[QuerySet, bool]:
    """Search = the exact trigger instance id (an indexed lookup); anything else matches
    nothing rather than scanning the table."""
    term = search_term.strip()
    if not term:
        return queryset, False
    as_uuid = parse_uuid(term)
    if as_uuid is None:
        return queryset.none(), False
    return queryset.filter(**{field: as_uuid}), False


@admin.register(StepExecutionLog)
class StepExecutionLogAdmin(
    LargeTableAdminMixin, LeanChangeListMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    list_display = (
        "started",
        "instance_display",
        "workflow",
        "node_id",
        "node_type",
        "run",
        "outcome",
        "duration",
        "error_short",
    )
    list_filter = (
        NodeIdFilter,
        "success",
        ("workflow", admin.RelatedFieldListFilter),
        NodeTypeFilter,
        ErrorKindFilter,
        SkipReasonFilter,
    )
    list_select_related = ("workflow",)
    changelist_defer = ("input_context", "output")
    # Newest first by primary key: rows are appended in time order, and the pk index
    # serves it; no index has started_at alone.
    ordering = ("-id",)
    sortable_by = ()
    search_fields = ("trigger__id",)
    search_help_text = "Exact trigger instance id (UUID)."
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "instance_display",
                    "workflow",
                    "workflow_version",
                    "node_id",
                    "node_type",
                    "run",
                    "started",
                    "finished",
                    "duration",
                    "outcome",
                    "locale",
                    "success",
                    "skip_reason",
                    "error_kind",
                    "error",
                    "task_id",
                    "worker",
                )
            },
        ),
        ("Output", {"fields": ("output_json",)}),
        ("Input context", {"fields": ("input_context_json",)}),
    )
    readonly_fields = (
        "instance_display",
        "outcome",
        "locale",
        "run",
        "started",
        "finished",
        "duration",
        "output_json",
        "input_context_json",
    )
    started = timestamp_column("started_at", "started")
    finished = timestamp_column("finished_at", "finished")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        return _search_by_instance(queryset, search_term, "trigger_id")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Runs of the node so far, across operator retries: a count over the instance's
        # own logs (steplog_trigger_started), evaluated for the page's rows only.
        earlier = (
            StepExecutionLog.objects.filter(
                trigger=OuterRef("trigger"),
                node_id=OuterRef("node_id"),
                id__lte=OuterRef("id"),
                parked=False,  # parking rows (a wait, a delay at the end) are no attempts
            )
            .order_by()
            .values("trigger")
            .annotate(n=Count("*"))
            .values("n")
        )
        # The rule of a skipped step from its output, which the list defers (one key
        # read in the query, for skipped rows only): step_outcome shows it.
        return (
            super()
            .get_queryset(request)
            .annotate(run_number=Subquery(earlier), skip_rule=skip_rule())
        )

    @admin.display(description="attempt")
    def run(self, obj: StepExecutionLog) -> str:
        return run_label(obj)

    @admin.display(description="outcome")
    def outcome(self, obj: StepExecutionLog) -> SafeString:
        return step_outcome(obj)

    @admin.display(description="locale")
    def locale(self, obj: StepExecutionLog) -> SafeString | str:
        return step_locale(obj)

    @admin.display(description="instance")
    def instance_display(self, obj: StepExecutionLog) -> SafeString:
        return instance_link(obj.trigger_id)

    @admin.display(description="duration")
    def duration(self, obj: StepExecutionLog) -> str:
        return f"{obj.duration_ms:.0f} ms"

    @admin.display(description="error")
    def error_short(self, obj: StepExecutionLog) -> SafeString | str:
        return truncated(obj.error, 70)

    @admin.display(description="output")
    def output_json(self, obj: StepExecutionLog) -> SafeString:
        return pretty_json(obj.output)

    @admin.display(description="input context")
    def input_context_json(self, obj: StepExecutionLog) -> SafeString:
        context = obj.input_context
        if isinstance(context, dict) and isinstance(context.get("payload"), dict):
            context = {**context, "payload": redact(context["payload"])}
        return pretty_json(context)


class DeliveryAttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Every provider call of the delivery (failover), oldest first."""

    model = DeliveryAttempt
    verbose_name = "provider attempt"
    verbose_name_plural = "provider attempts"
    fields = ("attempt", "provider", "outcome", "latency", "message_id", "error", "at")
    readonly_fields = fields
    ordering = ("id",)
    extra = 0
    max_num = 0
    can_delete = False

    @admin.display(description="latency")
    def latency(self, obj: DeliveryAttempt) -> str:
        return f"{obj.latency_ms} ms"


class DeliveryEventInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Status reports from the provider (webhooks), raw event kept."""

    model = DeliveryEvent
    verbose_name = "status event"
    verbose_name_plural = "status events"
    fields = ("received_at", "provider", "provider_event", "status", "applied", "raw_json")
    readonly_fields = fields
    ordering = ("id",)
    extra = 0
    max_num = 0
    can_delete = False

    @admin.display(description="raw event")
    def raw_json(self, obj: DeliveryEvent) -> SafeString:
        return format_html("<details><summary>raw</summary>{}</details>", pretty_json(obj.raw))


@admin.register(Delivery)
class DeliveryAdmin(
    LargeTableAdminMixin, LeanChangeListMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    list_display = (
        "updated",
        "instance_display",
        "node_id",
        "channel",
        "recipient_short",
        "status_display",
        "tracking_status",
        "provider_message_id_short",
        "attempts",
    )
    inlines = (DeliveryAttemptInline, DeliveryEventInline)
    list_filter = (
        "status",
        NodeIdFilter,
        ChannelFilter,
        ("instance__workflow", admin.RelatedFieldListFilter),
    )
    # The instance column is its id, so no join; the workflow filter joins when used.
    list_select_related = ()
    changelist_defer = ("output", "targets")
    ordering = ("-id",)
    sortable_by = ()
    search_fields = ("instance__id",)
    search_help_text = "Exact trigger instance id (UUID), or a recipient (email or phone)."
    fields = (
        "instance_display",
        "node_id",
        "channel",
        "recipient_display",
        "status_display",
        "tracking_status",
        "tracking_updated_at",
        "provider_message_id",
        "attempts",
        "created",
        "updated",
        "targets_table",
        "output_json",
    )
    readonly_fields = (
        "instance_display",
        "recipient_display",
        "status_display",
        "created",
        "updated",
        "targets_table",
        "output_json",
    )
    created = timestamp_column("created_at", "created")
    updated = timestamp_column("updated_at", "updated")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        # delivery_unique_instance_node leads with instance_id; delivery_recipient.
        if looks_like_recipient(search_term):
            return queryset.filter(recipient=normalize_recipient(search_term)), False
        return _search_by_instance(queryset, search_term, "instance_id")

    @admin.display(description="recipient")
    def recipient_short(self, obj: Delivery) -> SafeString:
        return visible_id(obj.recipient, limit=32)

    @admin.display(description="recipient")
    def recipient_display(self, obj: Delivery) -> SafeString:
        return visible_id(obj.recipient)

    @admin.display(description="provider message id")
    def provider_message_id_short(self, obj: Delivery) -> SafeString | str:
        return truncated(obj.provider_message_id, 20)

    @admin.display(description="instance")
    def instance_display(self, obj: Delivery) -> SafeString:
        return instance_link(obj.instance_id)

    @admin.display(description="status")
    def status_display(self, obj: Delivery) -> SafeString:
        return status_badge(obj.status, obj.get_status_display())

    @admin.display(description="output")
    def output_json(self, obj: Delivery) -> SafeString:
        return format_html("{}", pretty_json(obj.output))

    @admin.display(description="devices / connections")
    def targets_table(self, obj: Delivery) -> SafeString | str:
        return target_results(obj.targets)


TARGET_ROW = (
    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
    "<td><code>{}</code></td></tr>"
)


def target_results(targets: Mapping[str, Any] | None) -> SafeString | str:
    """A push or chat delivery's result per device or connection, one row each: what
    it is (a token's last characters, a webhook's host, a channel), its provider, its
    outcome and the provider's code or message id, whether it was removed as dead."""
    if not targets:
        return "-"
    rows = format_html_join(
        "",
        TARGET_ROW,
        (
            (
                result.get("target", ""),
                result.get("provider", ""),
                status_badge(str(result.get("outcome", ""))),
                result.get("code") or result.get("message_id") or "",
                "removed" if result.get("removed") else "",
                result.get("at", ""),
                target_id,
            )
            for target_id, result in targets.items()
        ),
    )
    return format_html(
        '<table class="nf-targets"><thead><tr><th>target</th><th>provider</th>'
        "<th>outcome</th><th>code / message id</th><th></th><th>at</th><th>id</th></tr>"
        "</thead><tbody>{}</tbody></table>",
        rows,
    )


@admin.register(TriggerStatusChange)
class TriggerStatusChangeAdmin(LargeTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("when", "instance_display", "from_status", "to_status", "actor", "reason_short")
    list_filter = ("to_status", "from_status", ("instance__workflow", admin.RelatedFieldListFilter))
    # The instance column is its id (no join); the workflow filter joins only when used.
    list_select_related = ()
    ordering = ("-id",)
    sortable_by = ()
    search_fields = ("actor",)
    search_help_text = "Exact instance id (UUID) or exact actor (operator username, worker)."
    fields = ("instance_display", "from_status", "to_status", "reason", "actor", "when")
    readonly_fields = ("instance_display", "when")
    when = timestamp_column("at")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        as_uuid = parse_uuid(term)
        if as_uuid is not None:  # status_change_instance_at
            return queryset.filter(instance_id=as_uuid), False
        return queryset.filter(actor=term), False

    @admin.display(description="instance")
    def instance_display(self, obj: TriggerStatusChange) -> SafeString:
        return instance_link(obj.instance_id)

    @admin.display(description="reason")
    def reason_short(self, obj: TriggerStatusChange) -> str:
        return obj.reason if len(obj.reason) <= 90 else obj.reason[:89] + "…"
