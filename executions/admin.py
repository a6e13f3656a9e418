"""Operator console for execution history: step logs and deliveries.

Both are history: read-only for everyone, superusers included. The trigger-instance
page (``triggers.admin``) gets its step-log inline and the drawing's node outcomes here.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, F, OuterRef, QuerySet, Subquery, Value, Window
from django.db.models.functions import Coalesce, RowNumber
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow.errors import ApplicationError
from notifyflow.redaction import redact
from triggers.admin import (
    ACTION_BATCH_LIMIT,
    InboxInline,
    StatusChangeInline,
    TriggerInstanceAdmin,
    WorkflowWithPauseAdmin,
)
from triggers.admin_support import instance_link
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import instance_retry
from workflows.admin_support import (
    LargeTableAdminMixin,
    LeanChangeListMixin,
    NodeIdFilter,
    ReadOnlyAdminMixin,
    parse_uuid,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)
from workflows.definition import NODE_TYPES
from workflows.models import Workflow

from .models import (
    Delivery,
    DeliveryAttempt,
    DeliveryEvent,
    StepExecutionLog,
    instance_ids_sent_to,
    looks_like_recipient,
    normalize_recipient,
)
from .preview import workflow_preview


class StepLogInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StepExecutionLog
    fk_name = "trigger"
    verbose_name = "step log"
    verbose_name_plural = "step logs"
    fields = (
        "node_id",
        "node_type",
        "run",
        "started",
        "duration",
        "success",
        "error_kind",
        "error_short",
        "output_json",
    )
    readonly_fields = fields
    ordering = ("started_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The input context is a copy of payload + vars per step: not shown here.
        return (
            super()
            .get_queryset(request)
            .defer("input_context")
            .annotate(
                # Parking rows (a wait, a delay at the end) are numbered apart: they
                # are not attempts.
                run_number=Window(
                    RowNumber(),
                    partition_by=[F("node_id"), F("parked")],
                    order_by=[F("started_at"), F("id")],
                )
            )
        )

    @admin.display(description="attempt")
    def run(self, obj: StepExecutionLog) -> str:
        return _run_label(obj)

    @admin.display(description="error")
    def error_short(self, obj: StepExecutionLog) -> SafeString | str:
        return truncated(obj.error, 90)

    started = timestamp_column("started_at", "started")

    @admin.display(description="duration")
    def duration(self, obj: StepExecutionLog) -> str:
        return f"{obj.duration_ms:.0f} ms"

    @admin.display(description="output")
    def output_json(self, obj: StepExecutionLog) -> SafeString | str:
        if not obj.output:
            return "-"
        return format_html(
            "<details><summary>{} keys</summary>{}</details>",
            len(obj.output),
            pretty_json(obj.output),
        )


def _run_label(obj: StepExecutionLog) -> str:
    """The run of this node counted across operator retries (``attempt`` restarts at 1
    after a retry: it is the retry budget of the current run), e.g. ``3 (retry budget 1)``
    when they differ. A parking row (a wait, a delay at the end) is no attempt: the row
    that resolves it is the node's run."""
    if obj.parked:
        return "parked (not an attempt)"
    run = getattr(obj, "run_number", None) or obj.attempt
    return str(run) if run == obj.attempt else f"{run} (retry budget {obj.attempt})"


def _last_failure_kind() -> Coalesce:
    """error_kind of the instance's latest failed step (steplog_trigger_started)."""
    latest = Subquery(
        StepExecutionLog.objects.filter(trigger=OuterRef("pk"), success=False)
        .order_by("-started_at", "-id")
        .values("error_kind")[:1]
    )
    # Never NULL, so exclude() on it keeps instances that have no failed step.
    return Coalesce(latest, Value(""))


class InstanceErrorKindFilter(admin.SimpleListFilter):
    """Failed instances by the kind of their last failure: a permanent one (render
    error, rejected recipient) fails again on a plain retry."""

    title = "error kind"
    parameter_name = "error_kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("permanent", "permanent"), ("transient", "transient")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if not self.value():
            return queryset
        kind = "permanent" if self.value() == "permanent" else "transient"
        kinds = ["permanent"] if kind == "permanent" else ["transient", "lease_expired"]
        return queryset.filter(status=TriggerStatus.FAILED).filter(last_error_kind__in=kinds)


# Permanent failures listed on the bulk retry's confirmation page (the count says the rest).
PERMANENT_SHOWN = 20


class InstanceWithStepsAdmin(TriggerInstanceAdmin):
    inlines = (StepLogInline, InboxInline, StatusChangeInline)
    list_display = (
        *TriggerInstanceAdmin.list_display[:-2],
        "error_kind_display",
        *TriggerInstanceAdmin.list_display[-2:],
    )
    list_filter = (
        *TriggerInstanceAdmin.list_filter[:3],
        InstanceErrorKindFilter,
        *TriggerInstanceAdmin.list_filter[3:],
    )
    actions = ("retry_failed", "retry_failed_including_permanent", "run_now", "cancel")

    search_help_text = (
        "Exact instance id (UUID), exact idempotency key, or a recipient: an email "
        "address or phone number a delivery was sent to."
    )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if not looks_like_recipient(search_term):
            return found, duplicates
        # The ids first (delivery_recipient index), then OR'd with the id/key match:
        # both sides are index lookups.
        ids = instance_ids_sent_to(search_term)
        return found | queryset.filter(pk__in=ids), False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # A correlated subquery: evaluated for the page's rows (and, when the filter is
        # used, for failed rows only).
        return super().get_queryset(request).annotate(last_error_kind=_last_failure_kind())

    @admin.display(description="kind")
    def error_kind_display(self, obj: TriggerInstance) -> SafeString | str:
        """permanent (a plain retry fails again) or transient, for a failed instance."""
        kind = getattr(obj, "last_error_kind", None)
        if obj.status != TriggerStatus.FAILED or not kind:
            return "-"
        colour = "#c62828" if kind == "permanent" else "#b35c00"
        return format_html(
            '<span class="nf-error-kind nf-error-kind-{}" style="color:{};font-weight:600">'
            "{}</span>",
            kind,
            colour,
            kind,
        )

    @admin.action(
        description="Retry selected failed instances (skips permanent failures)",
        permissions=["operate"],
    )
    def retry_failed(self, request: HttpRequest, queryset: QuerySet) -> None:
        permanent = queryset.filter(status=TriggerStatus.FAILED, last_error_kind="permanent")
        skipped = permanent.count()
        if queryset.exclude(pk__in=permanent.values("pk")).exists():
            self._apply(
                request,
                queryset.exclude(status=TriggerStatus.FAILED, last_error_kind="permanent"),
                instance_retry,
                verb="Retried",
                skip_reason="not failed, skipped",
                log_message="Retried (bulk action)",
            )
        if skipped:
            self.message_user(
                request,
                f"{skipped} permanent failure(s) skipped: a plain retry fails again (same "
                "payload, same workflow version). Fix the workflow and use “Retry on latest "
                "version”, edit the payload, or use “Retry … including permanent failures”.",
                messages.WARNING,
            )

    @admin.action(
        description="Retry selected failed instances, including permanent failures",
        permissions=["operate"],
    )
    def retry_failed_including_permanent(
        self, request: HttpRequest, queryset: QuerySet
    ) -> HttpResponse | None:
        """Asks first when the selection holds permanent failures (a plain retry fails
        again): a page listing them, whose "yes" posts the action back with ``confirmed``."""
        permanent = queryset.filter(status=TriggerStatus.FAILED, last_error_kind="permanent")
        if not request.POST.get("confirmed") and permanent.exists():
            shown = list(
                permanent.order_by("-created_at").select_related("workflow", "workflow_version")[
                    :PERMANENT_SHOWN
                ]
            )
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Retry permanent failures?",
                "permanent": shown,
                "permanent_count": permanent.count(),
                "selected_ids": list(
                    queryset.order_by().values_list("pk", flat=True)[: ACTION_BATCH_LIMIT + 1]
                ),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/triggers/triggerinstance/retry_permanent_confirm.html", context
            )
        super().retry_failed(request, queryset)
        return None

    def failure_kind(self, obj: TriggerInstance) -> str:
        # Annotated by get_queryset, which get_object uses too.
        return getattr(obj, "last_error_kind", "") or ""

    def delay_description(self, obj: TriggerInstance) -> SafeString | str:
        """The delay node whose step put the instance to sleep, with its rule (the
        latest delay step of the instance: steplog_trigger_started)."""
        step = (
            StepExecutionLog.objects.filter(trigger=obj, node_type="delay", success=True)
            .order_by("-started_at", "-id")
            .only("node_id", "output")
            .first()
        )
        if step is None:
            return super().delay_description(obj)
        rule = step.output.get("rule") if isinstance(step.output, dict) else None
        if rule:
            return format_html("delay node <code>{}</code> ({})", step.node_id, rule)
        return format_html("delay node <code>{}</code>", step.node_id)

    def node_states(self, obj: TriggerInstance) -> dict[str, tuple[str, str]]:
        states: dict[str, tuple[str, str]] = {}
        # Oldest first, so each node ends with the outcome of its latest attempt.
        for node_id, success, error in (
            StepExecutionLog.objects.filter(trigger=obj)
            .order_by("started_at", "id")
            .values_list("node_id", "success", "error")
        ):
            states[node_id] = ("succeeded", "") if success else ("failed", error)
        return states


admin.site.unregister(TriggerInstance)
admin.site.register(TriggerInstance, InstanceWithStepsAdmin)


class NodeTypeFilter(admin.SimpleListFilter):
    """Fixed choices: the stock filter would run a DISTINCT over the whole log table."""

    title = "node type"
    parameter_name = "node_type"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [(kind, kind) for kind in (*NODE_TYPES, "unknown")]

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
        "success",
        "duration",
        "error_short",
    )
    list_filter = (
        NodeIdFilter,
        "success",
        ("workflow", admin.RelatedFieldListFilter),
        NodeTypeFilter,
        ErrorKindFilter,
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
                    "success",
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
        return super().get_queryset(request).annotate(run_number=Subquery(earlier))

    @admin.display(description="attempt")
    def run(self, obj: StepExecutionLog) -> str:
        return _run_label(obj)

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
    changelist_defer = ("output",)
    ordering = ("-id",)
    sortable_by = ()
    search_fields = ("instance__id",)
    search_help_text = "Exact trigger instance id (UUID), or a recipient (email or phone)."
    fields = (
        "instance_display",
        "node_id",
        "channel",
        "recipient",
        "status_display",
        "tracking_status",
        "tracking_updated_at",
        "provider_message_id",
        "attempts",
        "created",
        "updated",
        "output_json",
    )
    readonly_fields = ("instance_display", "status_display", "created", "updated", "output_json")
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
    def recipient_short(self, obj: Delivery) -> SafeString | str:
        return truncated(obj.recipient, 32)

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


# --- workflow preview ------------------------------------------------------------------


class PreviewForm(forms.Form):
    payload = forms.JSONField(
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 12, "class": "vLargeTextField"}),
        help_text="The trigger payload, a JSON object.",
    )
    version = forms.IntegerField(
        required=False, min_value=1, help_text="Empty: the current version."
    )

    def clean_payload(self) -> dict[str, Any]:
        payload = self.cleaned_data["payload"]
        if not isinstance(payload, dict):
            raise forms.ValidationError("must be a JSON object")
        return payload


class WorkflowWithPreviewAdmin(WorkflowWithPauseAdmin):
    """Adds a "Preview" page (executions.preview: nothing sent, nothing written)."""

    change_form_template = "admin/executions/workflow_change_form.html"

    def get_urls(self) -> list:
        return [
            path(
                "<path:object_id>/preview/",
                self.admin_site.admin_view(self.preview_view),
                name="workflows_workflow_preview",
            ),
        ] + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {
            **(extra_context or {}),
            "nf_preview_url": reverse("admin:workflows_workflow_preview", args=[object_id]),
        }
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def preview_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        workflow = get_object_or_404(Workflow, pk=object_id)
        if not self.has_view_permission(request, workflow):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        form = PreviewForm(request.POST or None)
        result = None
        if request.method == "POST" and form.is_valid():
            try:
                result = workflow_preview(
                    key=workflow.key,
                    payload=form.cleaned_data["payload"],
                    version=form.cleaned_data["version"],
                )
            except ApplicationError as exc:
                form.add_error("version" if exc.field == "version" else None, exc.message)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": workflow,
            "title": f"Preview {workflow.key}",
            "form": form,
            "result": result,
            "result_json": json.dumps(result, indent=2, default=str) if result else "",
        }
        return TemplateResponse(request, "admin/executions/workflow_preview.html", context)


admin.site.unregister(Workflow)
admin.site.register(Workflow, WorkflowWithPreviewAdmin)
