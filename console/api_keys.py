"""Operator console for API keys: created through api_key_create (the raw key is shown
once, on the page that answers the POST, and never stored), revoked, never deleted; of an
existing key only the rate changes (api_key_set_rate)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from api_keys.models import ApiKey, ApiKeyScope
from api_keys.services import api_key_create, api_key_revoke, api_key_set_rate
from notifyflow.errors import ApplicationError
from notifyflow.throttling import validate_rate
from workflows.models import Workflow

from .support import log_admin_change, timestamp_column


class ApiKeyAddForm(forms.ModelForm):
    # Not the model field's name: the JSON list is written by api_key_create.
    workflow_keys = forms.ModelMultipleChoiceField(
        queryset=Workflow.objects.order_by("key"),
        to_field_name="key",
        required=False,
        help_text="Limit the key to these workflows; none selected: every workflow",
    )

    class Meta:
        model = ApiKey
        fields = ("name", "scope", "rate")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Left out: admin, like `create_api_key` without --scope.
        self.fields["scope"].required = False

    def clean_rate(self) -> str:
        return _clean_rate(self.cleaned_data.get("rate", ""))


class ApiKeyRateForm(forms.ModelForm):
    """An existing key: only its rate changes (through api_key_set_rate)."""

    class Meta:
        model = ApiKey
        fields = ("rate",)

    def clean_rate(self) -> str:
        return _clean_rate(self.cleaned_data.get("rate", ""))


def _clean_rate(rate: str) -> str:
    try:
        return validate_rate(rate)
    except ApplicationError as exc:
        raise forms.ValidationError(exc.message, code=exc.code) from exc


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created through api_key_create (the raw key is shown once, on the page
    that answers the POST, and never stored) and revoked, never deleted; of an existing
    key only the rate changes (api_key_set_rate)."""

    list_display = (
        "name",
        "prefix_display",
        "scope",
        "workflows_display",
        "rate_display",
        "active_display",
        "created",
        "last_used",
        "revoked",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "scope")
    search_fields = ("name", "prefix")
    actions = ("revoke",)
    readonly_fields = (
        "name",
        "prefix_display",
        "scope",
        "workflows_display",
        "active_display",
        "created",
        "last_used",
        "revoked",
    )
    created = timestamp_column("created_at", "created")
    last_used = timestamp_column("last_used_at", "last used")
    revoked = timestamp_column("revoked_at", "revoked")

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple:
        if obj is None:
            return ("name", "scope", "workflow_keys", "rate")
        return (*self.readonly_fields, "rate")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple:
        return () if obj is None else self.readonly_fields

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        kwargs["form"] = ApiKeyAddForm if obj is None else ApiKeyRateForm
        return super().get_form(request, obj, change=change, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # Revoke instead: the row stays, with when it was last used.
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("api_keys.change_apikey")

    @admin.display(description="prefix")
    def prefix_display(self, obj: ApiKey) -> SafeString:
        return format_html("<code>{}…</code>", obj.prefix)

    @admin.display(description="workflows")
    def workflows_display(self, obj: ApiKey) -> str:
        return ", ".join(obj.workflows) if obj.workflows else "all"

    @admin.display(description="rate")
    def rate_display(self, obj: ApiKey) -> str:
        return obj.rate or "-"

    @admin.display(description="active", boolean=True)
    def active_display(self, obj: ApiKey) -> bool:
        return obj.is_active

    def save_model(
        self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            api_key_set_rate(api_key=obj, rate=form.cleaned_data["rate"])
            return
        created, raw = api_key_create(
            name=form.cleaned_data["name"],
            scope=form.cleaned_data.get("scope") or ApiKeyScope.ADMIN,
            workflows=[w.key for w in form.cleaned_data.get("workflow_keys") or ()],
            rate=form.cleaned_data.get("rate") or "",
        )
        obj.pk, obj.name, obj.prefix = created.pk, created.name, created.prefix
        obj.scope, obj.workflows, obj.rate = created.scope, created.workflows, created.rate
        obj.key_hash, obj.created_at = created.key_hash, created.created_at
        obj._state.adding = False
        obj._state.db = created._state.db
        obj.raw_key = raw  # type: ignore[attr-defined]  # for response_add only; never saved

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: Any = None
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "api_key": obj,
            "raw_key": obj.raw_key,  # type: ignore[attr-defined]
            "changelist_url": reverse("admin:api_keys_apikey_changelist"),
        }
        return TemplateResponse(request, "admin/triggers/apikey/created.html", context)

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(api_key=key)
        log_admin_change(request, keys, "Revoked")
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)
