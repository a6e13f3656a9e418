"""Operator console for status webhooks: the customer's endpoints (created and edited
through the same services as the API; the signing secret shown once, after creating or
rotating, as a message), actions Rotate secret, Replay (a since/until form) and Enable,
an endpoint's audit trail inline; messages with their attempts, filtered by endpoint,
status and type. Operators view; changing needs the endpoint change permission."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import DateTimeField, ExpressionWrapper, OuterRef, QuerySet, Subquery, Value
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow.errors import ApplicationError
from notifyflow.ids import short_id
from status_webhooks.endpoints import (
    MAX_URL_LENGTH,
    SUBSCRIBABLE,
    endpoint_create,
    endpoint_delete,
    endpoint_enable,
    endpoint_fields_validate,
    endpoint_update,
    messages_replay,
    secret_rotate,
)
from status_webhooks.models import (
    EndpointChange,
    MessageStatus,
    WebhookAttempt,
    WebhookEndpoint,
    WebhookMessage,
)
from workflows.models import Workflow

from .support import (
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    instance_link,
    log_admin_change,
    precise_time,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)

ACTION_LIMIT = 50
# ``failing_since`` is written when the first failed attempt of a streak is recorded,
# after its POST began (``attempted_at``): the streak's attempts are looked for from
# this much earlier, longer than any claim's POSTs take.
FAILURE_LOOKBACK = timedelta(hours=1)


def _failed_attempts(endpoint: Any, since: Any) -> QuerySet:
    """The failed attempts of ``endpoint`` (a row, or an OuterRef to one) from ``since``,
    newest first (an attempt has an error for anything but a 2xx)."""
    return (
        WebhookAttempt.objects.filter(message__endpoint=endpoint, attempted_at__gte=since)
        .exclude(error="")
        .order_by("-attempted_at", "-id")
    )


def last_failed_attempt(endpoint: WebhookEndpoint) -> WebhookAttempt | None:
    """The latest failed attempt of a failing endpoint; None for a healthy one."""
    if endpoint.failing_since is None:
        return None
    since = endpoint.failing_since - FAILURE_LOOKBACK
    return _failed_attempts(endpoint, since).select_related("message").first()


def _workflow_choices() -> list[tuple[str, str]]:
    return [(key, key) for key in Workflow.objects.order_by("key").values_list("key", flat=True)]


class WebhookEndpointForm(forms.ModelForm):
    url = forms.CharField(
        label="URL",
        max_length=MAX_URL_LENGTH,
        widget=forms.URLInput(attrs={"size": 80}),
        help_text="http(s); its host (and port) must be allowed by "
        "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS",
    )
    event_types = forms.MultipleChoiceField(
        choices=[(t, t) for t in SUBSCRIBABLE],
        widget=forms.CheckboxSelectMultiple(attrs={"class": "nf-choices"}),
        help_text="delivery.* receives every delivery status",
    )
    workflows = forms.MultipleChoiceField(
        choices=_workflow_choices,
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 6}),
        help_text="None selected: every workflow",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["url", "description", "event_types", "workflows", "is_active"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            endpoint_fields_validate(
                url=data.get("url", ""),
                event_types=data.get("event_types") or [],
                workflows=data.get("workflows") or [],
                description=data.get("description", ""),
            )
        except ApplicationError as exc:
            name = (exc.field or "").split("[", 1)[0]
            self.add_error(name if name in self.fields else None, exc.message)
        return data


class ReplayForm(forms.Form):
    since = forms.DateTimeField(
        help_text="Messages created at this instant or later: YYYY-MM-DD HH:MM:SS (UTC)"
    )
    until = forms.DateTimeField(required=False, help_text="... and before this one (optional)")


class EndpointChangeInline(admin.TabularInline):
    model = EndpointChange
    fields = ("when", "actor", "action", "details_text")
    readonly_fields = fields
    ordering = ("-at",)
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name = "change"
    verbose_name_plural = "changes (newest first)"

    when = timestamp_column("at", "at")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="details")
    def details_text(self, obj: EndpointChange) -> str:
        return ", ".join(f"{k}: {v}" for k, v in obj.details.items()) or "-"


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = (
        "url",
        "description",
        "types",
        "workflows_text",
        "state",
        "failing_column",
        "created",
    )
    list_filter = ("is_active",)
    search_fields = ("url", "description")
    readonly_fields = (
        "state",
        "failing",
        "last_error",
        "disabled_reason",
        "rotation",
        "messages_link",
        "created",
        "updated",
    )
    inlines = (EndpointChangeInline,)
    actions = ("rotate_secret", "replay", "enable")

    created = timestamp_column("created_at", "created", sortable=True)
    updated = timestamp_column("updated_at", "updated")
    failing = timestamp_column("failing_since", "failing since")

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        editable = ("url", "description", "event_types", "workflows", "is_active")
        if obj is None:
            return [(None, {"fields": editable})]
        return [
            (None, {"fields": editable}),
            ("Health and secret", {"fields": self.readonly_fields}),
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The error of each failing endpoint's latest failed attempt, for the list (its
        # messages' attempts since it started failing; NULL for a healthy one).
        since = ExpressionWrapper(
            OuterRef("failing_since") - Value(FAILURE_LOOKBACK), output_field=DateTimeField()
        )
        latest = _failed_attempts(OuterRef("pk"), since).values("error")[:1]
        return super().get_queryset(request).annotate(last_failure_error=Subquery(latest))

    @admin.display(description="failing since")
    def failing_column(self, obj: WebhookEndpoint) -> SafeString | str:
        """When it started failing, and the error of its latest failed attempt."""
        if obj.failing_since is None:
            return "-"
        error = getattr(obj, "last_failure_error", None) or ""
        return format_html(
            '{}<div class="nf-last-error">{}</div>',
            self.failing(obj),
            truncated(error, 60) if error else "",
        )

    @admin.display(description="last error")
    def last_error(self, obj: WebhookEndpoint) -> SafeString | str:
        """The latest failed attempt of a failing endpoint: its error (HTTP status, or
        why no response came), when, the start of the response, and its message."""
        attempt = last_failed_attempt(obj)
        if attempt is None:
            return "-" if obj.failing_since is None else "no failed attempt recorded"
        message_url = reverse(
            "admin:status_webhooks_webhookmessage_change", args=[attempt.message_id]
        )
        excerpt = attempt.response_excerpt
        response = (
            format_html(
                '<div class="nf-last-error-response">response: <code title="{}">{}</code></div>',
                excerpt,
                excerpt if len(excerpt) <= 200 else excerpt[:199] + "…",
            )
            if excerpt
            else ""
        )
        return format_html(
            '<strong class="nf-last-error">{}</strong> at {} (<a href="{}">{} message</a>){}',
            attempt.error,
            precise_time(attempt.attempted_at),
            message_url,
            attempt.message.type,
            response,
        )

    @admin.display(description="event types")
    def types(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.event_types)

    @admin.display(description="workflows")
    def workflows_text(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.workflows) or "all"

    @admin.display(description="state")
    def state(self, obj: WebhookEndpoint) -> SafeString:
        if obj.is_active:
            return status_badge("completed", "active")
        return status_badge("failed" if obj.disabled_at else "cancelled", "disabled")

    @admin.display(description="secret rotation")
    def rotation(self, obj: WebhookEndpoint) -> str:
        expires = obj.previous_secret_expires_at
        if not obj.previous_secret or expires is None:
            return "-"
        return f"the previous secret signs too until {expires:%Y-%m-%d %H:%M:%S %Z}"

    @admin.display(description="messages")
    def messages_link(self, obj: WebhookEndpoint) -> SafeString:
        url = reverse("admin:status_webhooks_webhookmessage_changelist")
        return format_html('<a href="{}?endpoint__id__exact={}">messages</a>', url, obj.pk)

    def _actor(self, request: HttpRequest) -> str:
        return f"admin:{request.user.get_username()}"

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = form.cleaned_data
        fields = {
            "url": data["url"],
            "event_types": data["event_types"],
            "workflows": data.get("workflows") or [],
            "is_active": data.get("is_active", True),
            "description": data.get("description", ""),
            "actor": self._actor(request),
        }
        if change:
            saved = endpoint_update(endpoint=obj, **fields)
        else:
            saved = endpoint_create(**fields)
            self._show_secret(request, saved, "created")
        obj.pk, obj.secret = saved.pk, saved.secret
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        endpoint_delete(endpoint=obj, actor=self._actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for endpoint in queryset:
            endpoint_delete(endpoint=endpoint, actor=self._actor(request))

    def _show_secret(self, request: HttpRequest, endpoint: WebhookEndpoint, what: str) -> None:
        self.message_user(
            request,
            format_html(
                "Signing secret of {} ({}): <code class='nf-secret'>{}</code> - copy it "
                "now, it is not shown again.",
                endpoint.url,
                what,
                endpoint.secret,
            ),
            messages.WARNING,
        )

    @admin.action(description="Rotate secret (shown once)", permissions=["change"])
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet) -> None:
        done = []
        for endpoint in queryset[:ACTION_LIMIT]:
            rotated = secret_rotate(endpoint=endpoint, actor=self._actor(request))
            self._show_secret(request, rotated, "rotated; the old one signs too for 24 h")
            done.append(rotated)
        log_admin_change(request, done, "Rotated the signing secret")

    @admin.action(description="Enable (clear the disabled state)", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet) -> None:
        done = [
            endpoint_enable(endpoint=endpoint, actor=self._actor(request))
            for endpoint in queryset[:ACTION_LIMIT]
        ]
        log_admin_change(request, done, "Enabled")
        self.message_user(request, f"{len(done)} endpoint(s) active.")

    @admin.action(description="Replay messages of a time range", permissions=["change"])
    def replay(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        form = ReplayForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            since, until = form.cleaned_data["since"], form.cleaned_data.get("until")
            for endpoint in queryset[:ACTION_LIMIT]:
                try:
                    count = messages_replay(
                        endpoint=endpoint, since=since, until=until, actor=self._actor(request)
                    )
                except ApplicationError as exc:
                    self.message_user(request, f"{endpoint.url}: {exc.message}", messages.ERROR)
                    continue
                log_admin_change(request, [endpoint], f"Replayed {count} message(s)")
                self.message_user(request, f"{endpoint.url}: {count} message(s) queued again.")
            return None
        return TemplateResponse(
            request,
            "admin/status_webhooks/replay.html",
            {
                **self.admin_site.each_context(request),
                "title": "Replay messages",
                "opts": self.model._meta,
                "form": form,
                "endpoints": queryset,
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            },
        )


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ("when", "status_code", "duration_ms", "error", "response_excerpt")
    readonly_fields = fields
    ordering = ("attempted_at",)
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = "attempts (oldest first)"

    when = timestamp_column("attempted_at", "attempted at")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookMessage)
class WebhookMessageAdmin(
    LargeTableAdminMixin, LeanChangeListMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    list_display = (
        "short",
        "type",
        "endpoint_url",
        "instance",
        "status_display",
        "attempts",
        "last",
        "next_attempt_column",
        "created",
    )
    list_display_links = ("short",)
    list_filter = ("status", "type", "endpoint")
    list_select_related = ("endpoint",)
    ordering = ("-created_at",)
    changelist_defer = ("data",)
    fields = (
        "event_id",
        "type",
        "endpoint",
        "instance",
        "sequence",
        "workflow_key",
        "status_display",
        "attempts",
        "next_attempt",
        "delivered",
        "last_status_code",
        "last_error",
        "created",
        "body",
    )
    readonly_fields = fields
    inlines = (WebhookAttemptInline,)

    created = timestamp_column("created_at", "created", sortable=True)
    next_attempt = timestamp_column("next_attempt_at", "next attempt")
    delivered = timestamp_column("delivered_at", "delivered")

    @admin.display(description="webhook-id", ordering="created_at")
    def short(self, obj: WebhookMessage) -> SafeString:
        return format_html('<code title="{}">{}</code>', obj.event_id, short_id(obj.event_id))

    @admin.display(description="instance")
    def instance(self, obj: WebhookMessage) -> SafeString | str:
        if not obj.instance_id:
            return "-"
        return format_html("{} #{}", instance_link(obj.instance_id), obj.sequence)

    @admin.display(description="endpoint")
    def endpoint_url(self, obj: WebhookMessage) -> SafeString | str:
        return truncated(obj.endpoint.url, 36)

    @admin.display(description="next attempt")
    def next_attempt_column(self, obj: WebhookMessage) -> SafeString | str:
        if obj.status != MessageStatus.PENDING:
            return "-"
        return self.next_attempt(obj)

    @admin.display(description="status")
    def status_display(self, obj: WebhookMessage) -> SafeString:
        colour = {"pending": "enqueued", "delivered": "completed"}.get(obj.status, obj.status)
        return status_badge(colour, obj.get_status_display())

    @admin.display(description="last")
    def last(self, obj: WebhookMessage) -> SafeString | str:
        if obj.last_status_code is None and not obj.last_error:
            return "-"
        return truncated(str(obj.last_status_code or obj.last_error), 40, full=obj.last_error)

    @admin.display(description="data")
    def body(self, obj: WebhookMessage) -> SafeString:
        return pretty_json(obj.data)
