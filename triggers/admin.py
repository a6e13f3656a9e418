"""Operator console for trigger instances, their status audit and API keys.

Instances are read-only here; the only writes are the operator actions (retry, retry
on the latest version, edit payload and retry, run now, cancel), which call
``triggers.services`` (the one way in, as the API does) with the operator as the audited
actor, and leave a LogEntry for the admin's "Recent actions". What happens inside steps
(step logs, deliveries) is added by ``executions.admin``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow import ids
from notifyflow.errors import ApplicationError
from notifyflow.redaction import redact
from notifyflow.throttling import validate_rate
from workflows.admin import WorkflowAdmin
from workflows.admin_support import (
    InputListFilter,
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    can_operate,
    parse_uuid,
    precise_time,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
    waiting_until,
)
from workflows.drawing import draw_workflow_svg
from workflows.models import Workflow

from . import admin_bindings  # noqa: F401 - registers the event-binding admin
from .admin_support import instance_link
from .inbox_models import InboxEvent
from .models import ApiKey, ApiKeyScope, TriggerInstance, TriggerStatus, TriggerStatusChange
from .services import (
    api_key_create,
    api_key_revoke,
    api_key_set_rate,
    instance_cancel,
    instance_edit_payload_and_retry,
    instance_retry,
    instance_retry_on_latest_version,
    instance_run_now,
    workflow_pause,
    workflow_resume,
)

# Not granted to the operators group: triggers/migrations/0008 creates it, an
# administrator hands it out.
EDIT_PAYLOAD_PERMISSION = "triggers.edit_payload_triggerinstance"


class EditPayloadForm(forms.Form):
    payload = forms.JSONField(
        widget=forms.Textarea(
            attrs={"rows": 18, "class": "vLargeTextField", "style": "font-family:monospace"}
        ),
        help_text="A JSON object. The instance is retried at once with it; the audit row "
        "keeps the old and the new payload.",
    )

    def clean_payload(self) -> Any:
        payload = self.cleaned_data["payload"]
        if not isinstance(payload, dict):
            raise forms.ValidationError("must be a JSON object")
        return payload


class OperatorReasonForm(forms.Form):
    """The reason an operator gives for "run now" or "cancel" (the instance page's
    inputs, change_form.html): written into the audit row and the admin's LogEntry."""

    reason = forms.CharField(max_length=500, required=False)


def log_admin_change(request: HttpRequest, objects: Iterable[Model], message: str) -> None:
    """One "changed" LogEntry per object, so the admin's "Recent actions" and the
    object history show what an operator did (the status audit has the details)."""
    objects = list(objects)
    if objects:
        LogEntry.objects.log_actions(
            user_id=request.user.pk,
            queryset=objects,
            action_flag=CHANGE,
            change_message=message,
            single_object=len(objects) == 1,
        )


def with_reason(text: str, reason: str) -> str:
    return f"{text}: {reason}" if reason else text


# An action over "all N matching" could name a million rows; each retry is a
# transaction plus a broker message, so one click handles at most this many.
ACTION_BATCH_LIMIT = 500


def is_waiting(obj: TriggerInstance) -> bool:
    """Enqueued but not due: a delay, a retry's backoff or a wait."""
    return obj.status == TriggerStatus.ENQUEUED and obj.available_at > timezone.now()


class WaitingFilter(admin.SimpleListFilter):
    """Enqueued instances split by due time (the partial index trigger_due_enqueued)."""

    title = "due"
    parameter_name = "due"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("waiting", "waiting (not due yet)"), ("now", "due now")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        now = timezone.now()
        if self.value() == "waiting":
            return queryset.filter(status=TriggerStatus.ENQUEUED, available_at__gt=now)
        if self.value() == "now":
            return queryset.filter(status=TriggerStatus.ENQUEUED, available_at__lte=now)
        return queryset


class HasErrorFilter(InputListFilter):
    """Failed instances whose last error contains the text (a LIKE over failed rows)."""

    title = "last error"
    parameter_name = "error"
    placeholder = "text in the"

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        return queryset.filter(status=TriggerStatus.FAILED, last_error__icontains=value)


class StatusChangeInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = TriggerStatusChange
    fk_name = "instance"
    verbose_name = "status change"
    verbose_name_plural = "status history"
    fields = ("from_status", "to_status", "reason", "actor", "when", "details_json")
    readonly_fields = fields
    ordering = ("at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    when = timestamp_column("at")

    @admin.display(description="details")
    def details_json(self, obj: TriggerStatusChange) -> SafeString | str:
        if not obj.details:
            return "-"
        return format_html(
            "<details><summary>{}</summary>{}</details>",
            ", ".join(sorted(obj.details)),
            pretty_json(obj.details),
        )


class InboxInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Events delivered to the instance: pending ones wait for a wait node."""

    model = InboxEvent
    fk_name = "instance"
    verbose_name = "inbox event"
    verbose_name_plural = "inbox"
    fields = ("name", "event_id", "received", "state", "consumed_by_node")
    readonly_fields = fields
    ordering = ("received_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    received = timestamp_column("received_at", "received")

    @admin.display(description="state")
    def state(self, obj: InboxEvent) -> str:
        if obj.consumed_at is None:
            return "pending"
        return f"consumed {obj.consumed_at.isoformat(timespec='seconds')}"


@admin.register(TriggerInstance)
class TriggerInstanceAdmin(
    LargeTableAdminMixin, LeanChangeListMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    list_display = (
        "short_id",
        "idempotency_key_short",
        "status_display",
        "workflow",
        "node",
        "tries",
        "due",
        "last_error_short",
        "created",
    )
    list_display_links = ("short_id",)
    list_filter = (
        "status",
        WaitingFilter,
        HasErrorFilter,
        "workflow",
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("workflow",)
    changelist_defer = ("payload", "vars")
    # Every index on the table leads with created_at after the filter columns; sorting
    # by anything else would be a sort of the whole (filtered) table per page.
    sortable_by = ("created",)
    ordering = ("-created_at",)
    search_fields = ("idempotency_key",)
    search_help_text = "Exact instance id (UUID) or exact idempotency key."
    actions = ("retry_failed", "run_now", "cancel")
    inlines: tuple[type[admin.options.InlineModelAdmin], ...] = (
        InboxInline,
        StatusChangeInline,
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "workflow",
                    "version_display",
                    "idempotency_key",
                    "status_display",
                    "waiting_display",
                    "current_node_id",
                    "attempts",
                    "due",
                    "available",
                    "last_error",
                    "created",
                    "updated",
                    "finished",
                )
            },
        ),
        ("Graph", {"fields": ("drawing",)}),
        ("Payload", {"fields": ("payload_json",)}),
        ("Vars (outputs of earlier nodes)", {"fields": ("vars_json",)}),
        (
            "Lease",
            {
                "fields": ("locked_by", "locked", "lease_token", "dispatched"),
                "classes": ("collapse",),
            },
        ),
    )
    readonly_fields = (
        "waiting_display",
        "version_display",
        "status_display",
        "due",
        "available",
        "created",
        "updated",
        "finished",
        "drawing",
        "payload_json",
        "vars_json",
        "locked",
        "dispatched",
    )
    available = timestamp_column("available_at", "available at")
    created = timestamp_column("created_at", "created", sortable=True)
    updated = timestamp_column("updated_at", "updated")
    finished = timestamp_column("finished_at", "finished")
    locked = timestamp_column("locked_until", "locked until")
    dispatched = timestamp_column("dispatched_at", "dispatched at")

    # --- list -------------------------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Exact matches only, each served by an index (the primary key and
        trigger_idempotency_key); a LIKE '%term%' over a million rows is a full scan."""
        term = search_term.strip()
        if not term:
            return queryset, False
        condition = Q(idempotency_key=term)
        as_uuid = parse_uuid(term)
        if as_uuid is not None:
            condition |= Q(pk=as_uuid)
        return queryset.filter(condition), False

    @admin.display(description="tries")
    def tries(self, obj: TriggerInstance) -> int:
        """Failures of the current node (the retry budget; README)."""
        return obj.attempts

    @admin.display(description="node", ordering=None)
    def node(self, obj: TriggerInstance) -> str:
        return obj.current_node_id or "-"

    @admin.display(description="id", ordering="created_at")
    def short_id(self, obj: TriggerInstance) -> str:
        return ids.short_id(obj.pk)

    @admin.display(description="idempotency key")
    def idempotency_key_short(self, obj: TriggerInstance) -> SafeString | str:
        return truncated(obj.idempotency_key, 28)

    @admin.display(description="status")
    def status_display(self, obj: TriggerInstance) -> SafeString:
        if is_waiting(obj):
            return status_badge("waiting", "Waiting")
        return status_badge(obj.status, obj.get_status_display())

    @admin.display(description="due")
    def due(self, obj: TriggerInstance) -> SafeString | str:
        """ "waiting until …" (absolute, with zone, and relative) for a delayed, backing-off
        or waiting instance; "due now" for one a worker should pick up; else "-"."""
        if obj.status != TriggerStatus.ENQUEUED:
            return "-"
        return waiting_until(obj.available_at) or "due now"

    @admin.display(description="last error")
    def last_error_short(self, obj: TriggerInstance) -> SafeString | str:
        # "node text: ..." - the node is the column beside it; the full text on hover.
        prefix = f"node {obj.current_node_id}: "
        text = obj.last_error
        short = text[len(prefix) :] if text.startswith(prefix) else text
        return truncated(short, 90, full=text)

    # --- detail -----------------------------------------------------------------------

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> TriggerInstance | None:
        queryset = self.get_queryset(request).select_related("workflow", "workflow_version")
        field = self.opts.pk if from_field is None else self.opts.get_field(from_field)
        try:
            return queryset.get(**{field.name: field.to_python(object_id)})
        except (TriggerInstance.DoesNotExist, ValueError, forms.ValidationError):
            return None

    @admin.display(description="waiting for")
    def waiting_display(self, obj: TriggerInstance) -> SafeString | str:
        """What an enqueued instance waits for - an event (wait node), a retry's backoff
        or a delay - and until when; "-" for one that is running or finished."""
        if obj.status != TriggerStatus.ENQUEUED:
            return "-"
        node = obj.current_node_id
        if obj.waiting_for_event:
            deadline = obj.wait_deadline or obj.available_at
            return format_html(
                "event <code>{}</code> at node <code>{}</code>, {} (then it times out and "
                "continues)",
                obj.waiting_for_event,
                node or "-",
                waiting_until(deadline) or f"deadline {precise_time(deadline)} passed",
            )
        until = waiting_until(obj.available_at)
        if until is None:
            if obj.workflow.is_paused:
                return "nothing: due now, but the workflow is paused (it runs on resume)"
            return "nothing: due now (a worker picks it up)"
        if obj.attempts and obj.last_error:
            # Inline, not truncated(): its two-line clamp breaks the sentence apart.
            error = obj.last_error.removeprefix(f"node {node}: ")
            return format_html(
                'retry backoff: attempt {} of node <code>{}</code> failed (<span title="{}">{}'
                "</span>); next attempt {}",
                obj.attempts,
                node or "-",
                obj.last_error,
                error if len(error) <= 120 else error[:119] + "…",
                until,
            )
        then = (
            format_html("then node <code>{}</code> runs", node)
            if node
            else "then the workflow completes"
        )
        return format_html("{}, {}; {}", self.delay_description(obj), until, then)

    def delay_description(self, obj: TriggerInstance) -> SafeString | str:
        """The delay an enqueued instance sits in ("delay node <id> (rule)"); the
        executions layer, which has the step logs, overrides this."""
        return "a delay"

    @admin.display(description="workflow version")
    def version_display(self, obj: TriggerInstance) -> str:
        return f"v{obj.workflow_version.version}"

    def node_states(self, obj: TriggerInstance) -> dict[str, tuple[str, str]]:
        """node id -> ("succeeded" / "failed", error of that latest attempt), for the
        drawing (steps are the executions layer's, which overrides this)."""
        return {}

    @admin.display(description="graph")
    def drawing(self, obj: TriggerInstance) -> SafeString:
        states = self.node_states(obj)
        return draw_workflow_svg(
            obj.workflow_version.definition,
            current_node=obj.current_node_id,
            node_states={node: state for node, (state, _) in states.items()},
            node_errors={node: error for node, (_, error) in states.items() if error},
            waiting_until=(
                timezone.localtime(obj.available_at).strftime("%Y-%m-%d %H:%M %Z")
                if is_waiting(obj)
                else None
            ),
        )

    @admin.display(description="payload")
    def payload_json(self, obj: TriggerInstance) -> SafeString:
        return pretty_json(redact(obj.payload))

    @admin.display(description="vars")
    def vars_json(self, obj: TriggerInstance) -> SafeString:
        return pretty_json(obj.vars)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: TriggerInstance | None = None,
    ) -> HttpResponse:
        if obj is not None and can_operate(request):
            failed = obj.status == TriggerStatus.FAILED
            context["nf_can_retry"] = failed
            # A permanent failure fails again on a plain retry: the button goes to a
            # page that says so first.
            context["nf_retry_needs_confirmation"] = (
                failed and self.failure_kind(obj) == "permanent"
            )
            latest = obj.workflow.current_version_id
            if failed and latest not in (None, obj.workflow_version_id):
                context["nf_latest_version"] = obj.workflow.current_version.version
            context["nf_can_edit_payload"] = failed and request.user.has_perm(
                EDIT_PAYLOAD_PERMISSION
            )
            context["nf_can_run_now"] = is_waiting(obj)
            context["nf_can_cancel"] = not obj.is_terminal
        context["nf_step_logs_url"] = (
            reverse("admin:executions_stepexecutionlog_changelist")
            + f"?trigger__id__exact={obj.pk}"
            if obj is not None
            else ""
        )
        return super().render_change_form(
            request, context, add=add, change=change, form_url=form_url, obj=obj
        )

    def failure_kind(self, obj: TriggerInstance) -> str:
        """ "permanent" or "transient" for the latest failed step of ``obj``, "" when
        unknown (step logs are the executions layer's, which overrides this)."""
        return ""

    # --- operator actions ---------------------------------------------------------------

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    def get_urls(self) -> list:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        views = {
            "retry": self.retry_view,
            "retry/confirm": self.retry_confirm_view,
            "retry-latest": self.retry_latest_view,
            "edit-payload": self.edit_payload_view,
            "run-now": self.run_now_view,
            "cancel": self.cancel_view,
        }
        # Before the stock URLs: "<path:object_id>/" would swallow ".../retry/".
        return [
            path(
                f"<path:object_id>/{suffix}/",
                self.admin_site.admin_view(view),
                name=f"{prefix}_{suffix.replace('-', '_').replace('/', '_')}",
            )
            for suffix, view in views.items()
        ] + super().get_urls()

    @admin.action(description="Retry selected failed instances", permissions=["operate"])
    def retry_failed(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(
            request,
            queryset,
            instance_retry,
            verb="Retried",
            skip_reason="not failed, skipped",
            log_message="Retried (bulk action)",
        )

    @admin.action(description="Run selected delayed instances now", permissions=["operate"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(
            request,
            queryset,
            instance_run_now,
            verb="Made due now",
            skip_reason="not waiting for a later time, skipped",
            log_message="Run now (bulk action)",
        )

    @admin.action(description="Cancel selected unfinished instances", permissions=["operate"])
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        def cancel_one(*, instance_id: Any, actor: str) -> None:
            instance_cancel(instance_id=instance_id, actor=actor, reason="cancelled by operator")

        self._apply(
            request,
            queryset,
            cancel_one,
            verb="Cancelled",
            skip_reason="already finished, skipped",
            log_message="Cancelled (bulk action)",
        )

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet,
        operation: Any,
        *,
        verb: str,
        skip_reason: str,
        log_message: str,
    ) -> None:
        ids = list(queryset.order_by().values_list("pk", flat=True)[: ACTION_BATCH_LIMIT + 1])
        if len(ids) > ACTION_BATCH_LIMIT:
            ids = ids[:ACTION_BATCH_LIMIT]
            self.message_user(
                request,
                f"Only the first {ACTION_BATCH_LIMIT} selected "
                "instances were handled; run the action again for the rest.",
                messages.WARNING,
            )
        actor = request.user.get_username()

        def applied(pk: Any) -> bool:
            # The services raise when they cannot act on an instance: counted as skipped.
            try:
                operation(instance_id=pk, actor=actor)
            except ApplicationError:
                return False
            return True

        done = [pk for pk in ids if applied(pk)]
        # object_repr needs the key; one query for the whole batch.
        log_admin_change(
            request,
            TriggerInstance.objects.filter(pk__in=done).only("pk", "idempotency_key"),
            log_message,
        )
        if done:
            self.message_user(request, f"{verb} {len(done)} instance(s).", messages.SUCCESS)
        if len(ids) - len(done):
            self.message_user(
                request, f"{len(ids) - len(done)} instance(s) {skip_reason}.", messages.WARNING
            )

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A plain retry (same version, same payload). A permanent failure is retried
        only from the confirmation page (``confirmed`` in the POST); without it the
        operator is sent there."""

        def retry(obj: TriggerInstance, actor: str) -> tuple[str, str] | HttpResponse:
            if self.failure_kind(obj) == "permanent" and not request.POST.get("confirmed"):
                return HttpResponseRedirect(self._instance_url(obj, "retry_confirm"))
            instance_retry(instance_id=obj.pk, actor=actor)
            return (
                "Retry scheduled: the instance is enqueued to run now.",
                f"Retried on workflow version v{obj.workflow_version.version} (same payload)",
            )

        return self._operate(request, object_id, retry, failed="Not retried")

    def retry_confirm_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page between "Retry" and a plain retry of a permanent failure: why it
        will most likely fail again, and the retries that can succeed instead."""
        if not self.has_operate_permission(request):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        latest = obj.workflow.current_version
        newer = latest if latest is not None and latest.pk != obj.workflow_version_id else None
        node_in_newer = newer is not None and any(
            node.get("id") == obj.current_node_id for node in newer.definition.get("nodes", [])
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"Retry {ids.short_id(obj.pk)}?",
            "change_url": self._instance_url(obj, "change"),
            "is_failed": obj.status == TriggerStatus.FAILED,
            "failure_kind": self.failure_kind(obj),
            "version": obj.workflow_version.version,
            "newer_version": newer.version if newer is not None else None,
            "node_in_newer": node_in_newer,
            "can_edit_payload": request.user.has_perm(EDIT_PAYLOAD_PERMISSION),
        }
        return TemplateResponse(
            request, "admin/triggers/triggerinstance/retry_confirm.html", context
        )

    def retry_latest_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def retry_latest(obj: TriggerInstance, actor: str) -> tuple[str, str]:
            old = obj.workflow_version.version
            version = instance_retry_on_latest_version(instance_id=obj.pk, actor=actor)
            return (
                f"Retry scheduled on workflow version v{version}: the instance is enqueued "
                "to run now.",
                f"Retried on workflow version v{version} (was v{old})",
            )

        return self._operate(request, object_id, retry_latest, failed="Not retried")

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def run_now(obj: TriggerInstance, actor: str, reason: str) -> tuple[str, str]:
            instance_run_now(instance_id=obj.pk, actor=actor, reason=reason)
            return (
                "The instance is due now and was handed to a worker.",
                with_reason("Run now", reason),
            )

        return self._operate_with_reason(request, object_id, run_now, failed="Not run")

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def cancel(obj: TriggerInstance, actor: str, reason: str) -> tuple[str, str]:
            instance_cancel(
                instance_id=obj.pk,
                actor=actor,
                reason=with_reason("cancelled by operator", reason),
            )
            return (
                "The instance is cancelled: nothing more of it runs.",
                with_reason("Cancelled", reason),
            )

        return self._operate_with_reason(request, object_id, cancel, failed="Not cancelled")

    def edit_payload_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not (
            self.has_operate_permission(request) and request.user.has_perm(EDIT_PAYLOAD_PERMISSION)
        ):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        change_url = self._instance_url(obj, "change")
        form = EditPayloadForm(
            request.POST if request.method == "POST" else None, initial={"payload": obj.payload}
        )
        if request.method == "POST" and form.is_valid():
            try:
                instance_edit_payload_and_retry(
                    instance_id=obj.pk,
                    actor=request.user.get_username(),
                    payload=form.cleaned_data["payload"],
                )
            except ApplicationError as exc:
                form.add_error("payload", exc.message)
            else:
                log_admin_change(request, [obj], "Payload edited and retried")
                self.message_user(
                    request,
                    "Payload replaced and retry scheduled (old and new payload audited).",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"Edit payload and retry {ids.short_id(obj.pk)}",
            "form": form,
            "change_url": change_url,
            "is_failed": obj.status == TriggerStatus.FAILED,
        }
        return TemplateResponse(
            request, "admin/triggers/triggerinstance/edit_payload.html", context
        )

    def _instance_url(self, obj: TriggerInstance, view: str) -> str:
        return reverse(f"admin:triggers_triggerinstance_{view}", args=[quote(obj.pk)])

    def _operate(
        self,
        request: HttpRequest,
        object_id: str,
        operation: Callable[[TriggerInstance, str], tuple[str, str] | HttpResponse],
        *,
        failed: str,
    ) -> HttpResponse:
        """A button: POST only (CSRF checked by admin_view), operate permission, then
        ``operation(instance, actor)`` -> (message for the operator, LogEntry text), or
        a response to send instead. An ApplicationError is the error message."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_operate_permission(request):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        try:
            outcome = operation(obj, request.user.get_username())
        except ApplicationError as exc:
            self.message_user(request, f"{failed}: {exc.message}.", messages.ERROR)
        else:
            if isinstance(outcome, HttpResponse):
                return outcome
            done, log_message = outcome
            log_admin_change(request, [obj], log_message)
            self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(self._instance_url(obj, "change"))

    def _operate_with_reason(
        self,
        request: HttpRequest,
        object_id: str,
        operation: Callable[[TriggerInstance, str, str], tuple[str, str]],
        *,
        failed: str,
    ) -> HttpResponse:
        """``_operate`` for a form with the operator's reason (OperatorReasonForm)."""
        form = OperatorReasonForm(request.POST)

        def with_form(obj: TriggerInstance, actor: str) -> tuple[str, str]:
            if not form.is_valid():
                errors = "; ".join(str(e) for e in form.errors.get("reason", []))
                raise ApplicationError(code="invalid", field="reason", message=f"reason: {errors}")
            return operation(obj, actor, form.cleaned_data["reason"])

        return self._operate(request, object_id, with_form, failed=failed)


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
        return request.user.has_perm("triggers.change_apikey")

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
        obj.raw_key = raw  # for response_add only; never saved

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: Any = None
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "api_key": obj,
            "raw_key": obj.raw_key,
            "changelist_url": reverse("admin:triggers_apikey_changelist"),
        }
        return TemplateResponse(request, "admin/triggers/apikey/created.html", context)

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(api_key=key)
        log_admin_change(request, keys, "Revoked")
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)


class WorkflowWithPauseAdmin(WorkflowAdmin):
    """Pause and resume act on the workflow's instances (resume dispatches the due
    ones), so they are added here, in the triggers layer."""

    list_display = (*WorkflowAdmin.list_display, "is_paused")
    list_filter = (*WorkflowAdmin.list_filter, "is_paused")
    actions = (*WorkflowAdmin.actions, "pause", "resume")

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    @admin.action(description="Pause selected workflows (no step starts)", permissions=["operate"])
    def pause(self, request: HttpRequest, queryset: QuerySet) -> None:
        workflows = list(queryset)
        for workflow in workflows:
            workflow_pause(workflow=workflow, actor=request.user.get_username())
        log_admin_change(request, workflows, "Paused")
        self.message_user(request, f"Paused {len(workflows)} workflow(s).", messages.SUCCESS)

    @admin.action(description="Resume selected workflows", permissions=["operate"])
    def resume(self, request: HttpRequest, queryset: QuerySet) -> None:
        workflows = list(queryset)
        for workflow in workflows:
            workflow_resume(workflow=workflow, actor=request.user.get_username())
        log_admin_change(request, workflows, "Resumed")
        self.message_user(request, f"Resumed {len(workflows)} workflow(s).", messages.SUCCESS)


admin.site.unregister(Workflow)
admin.site.register(Workflow, WorkflowWithPauseAdmin)
