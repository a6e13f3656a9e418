"""Operator console for workflow triggers (event bindings, with a key preview page) and
the read-only event log."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.safestring import SafeString

from notifyflow.errors import ApplicationError
from triggers.events import (
    idempotency_key_preview,
    idempotency_setting_validate,
    workflow_trigger_save,
)
from triggers.idempotency import default_setting_json
from triggers.models.events import EventRecord, WorkflowTrigger

from .support import timestamp_column
from .visible import visible_id


class WorkflowTriggerForm(forms.ModelForm):
    idempotency_setting = forms.JSONField(
        initial=default_setting_json,
        widget=forms.Textarea(attrs={"rows": 12, "cols": 60, "style": "font-family: monospace"}),
        help_text="strategy (NONE, UUID, TIME_WINDOW, CONTEXT_BASED, CONTEXT_TIME_WINDOW, "
        "EVENT_BASED, CUSTOM_EXPRESSION), ttlMinutes, contextFields, "
        "includeTriggerId, includeEventType, includeEventId, customExpression, "
        "failOnMissingContext. Empty = UUID.",
        required=False,
    )

    class Meta:
        model = WorkflowTrigger
        fields = ["event_name", "workflow", "is_active", "idempotency_setting"]

    def clean_idempotency_setting(self) -> dict[str, Any]:
        try:
            return idempotency_setting_validate(self.cleaned_data.get("idempotency_setting"))
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from exc


class PreviewKeyForm(forms.Form):
    context = forms.JSONField(
        initial=dict,
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 60, "style": "font-family: monospace"}),
        help_text='The event context, a JSON object, e.g. {"userId": "u1"}',
    )
    event_id = forms.CharField(required=False, max_length=255)
    at = forms.DateTimeField(
        required=False, help_text="ISO-8601 instant (UTC unless an offset is given); empty = now"
    )

    def clean_context(self) -> dict[str, Any]:
        context = self.cleaned_data.get("context") or {}
        if not isinstance(context, dict):
            raise forms.ValidationError("must be a JSON object", code="not_an_object")
        return context


@admin.register(WorkflowTrigger)
class WorkflowTriggerAdmin(admin.ModelAdmin):
    form = WorkflowTriggerForm
    change_form_template = "admin/triggers/workflowtrigger/binding_change_form.html"
    list_display = ["event_name_display", "workflow", "is_active", "strategy"]
    list_display_links = ["event_name_display"]
    list_filter = ["is_active"]
    list_select_related = ["workflow"]
    search_fields = ["event_name", "workflow__key"]
    readonly_fields = ["created", "updated"]
    created = timestamp_column("created_at", "created")
    updated = timestamp_column("updated_at", "updated")

    @admin.display(description="event name", ordering="event_name")
    def event_name_display(self, obj: WorkflowTrigger) -> SafeString:
        return visible_id(obj.event_name)

    @admin.display(description="strategy")
    def strategy(self, obj: WorkflowTrigger) -> str:
        return obj.strategy_label

    def save_model(
        self, request: HttpRequest, obj: WorkflowTrigger, form: Any, change: bool
    ) -> None:
        workflow_trigger_save(
            binding=obj,
            event_name=obj.event_name,
            workflow=obj.workflow,
            is_active=obj.is_active,
            idempotency_setting=obj.idempotency_setting,
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/preview-key/",
                self.admin_site.admin_view(self.preview_key_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_preview_key",
            ),
            *super().get_urls(),
        ]

    def preview_key_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Show the key this binding would generate for a context, event id and time."""
        binding = self.get_object(request, unquote(object_id))
        if binding is None:
            raise Http404("no such workflow trigger")
        if not self.has_view_or_change_permission(request, binding):
            raise PermissionDenied
        form = PreviewKeyForm(request.POST or None)
        preview = None
        if request.method == "POST" and form.is_valid():
            try:
                preview = idempotency_key_preview(
                    binding=binding,
                    context=form.cleaned_data["context"] or {},
                    event_id=form.cleaned_data["event_id"] or None,
                    at=form.cleaned_data["at"],
                )
            except ApplicationError as exc:
                target = exc.field if exc.field in form.fields else None
                form.add_error(target, exc.message)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": binding,
            "title": f"Preview idempotency key: {binding}",
            "form": form,
            "preview": preview,
            "setting_json": json.dumps(binding.idempotency_setting, indent=2),
        }
        return TemplateResponse(request, "admin/triggers/workflowtrigger/preview_key.html", context)


@admin.register(EventRecord)
class EventRecordAdmin(admin.ModelAdmin):
    """Read-only: events are written by POST /api/v1/events/ only."""

    list_display = ["name_display", "event_id_display", "received", "summary"]
    list_display_links = ["name_display"]
    received = timestamp_column("received_at", "received")
    search_fields = ["=name", "=event_id"]
    date_hierarchy = "received_at"
    show_full_result_count = False
    fields = ("name_display", "event_id_display", "context_sha256", "received", "outcomes")
    readonly_fields = fields

    @admin.display(description="name")
    def name_display(self, obj: EventRecord) -> SafeString:
        return visible_id(obj.name)

    @admin.display(description="event id")
    def event_id_display(self, obj: EventRecord) -> SafeString:
        return visible_id(obj.event_id)

    @admin.display(description="outcomes")
    def summary(self, obj: EventRecord) -> str:
        counts = obj.outcome_counts
        return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no bindings"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
