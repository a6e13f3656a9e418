"""The operator buttons of a trigger instance's page: retry (asking first for a
permanent failure), retry on the latest version, edit payload and retry, run now,
cancel. Each is a POST to its own URL that calls one service with the operator as the
audited actor and leaves a LogEntry; an ApplicationError becomes the error message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from notifyflow import ids
from notifyflow.errors import ApplicationError
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import (
    instance_cancel,
    instance_edit_payload_and_retry,
    instance_retry,
    instance_retry_on_latest_version,
    instance_run_now,
)

from ..support import can_operate, log_admin_change
from .columns import failure_kind
from .detail import EDIT_PAYLOAD_PERMISSION

# (message for the operator, LogEntry text), or a response to send instead.
Outcome = tuple[str, str] | HttpResponse


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


def with_reason(text: str, reason: str) -> str:
    return f"{text}: {reason}" if reason else text


def instance_url(obj: TriggerInstance, view: str) -> str:
    return reverse(f"admin:triggers_triggerinstance_{view}", args=[quote(obj.pk)])


class InstancePagesMixin(admin.ModelAdmin):
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

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A plain retry (same version, same payload). A permanent failure is retried
        only from the confirmation page (``confirmed`` in the POST); without it the
        operator is sent there."""

        def retry(obj: TriggerInstance, actor: str) -> Outcome:
            if failure_kind(obj) == "permanent" and not request.POST.get("confirmed"):
                return HttpResponseRedirect(instance_url(obj, "retry_confirm"))
            instance_retry(instance_id=obj.pk, actor=actor)
            return (
                "Retry scheduled: the instance is enqueued to run now.",
                f"Retried on workflow version v{obj.workflow_version.version} (same payload)",
            )

        return self._operate(request, object_id, retry, failed="Not retried")

    def retry_confirm_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page between "Retry" and a plain retry of a permanent failure: why it
        will most likely fail again, and the retries that can succeed instead."""
        if not can_operate(request):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self.missing_redirect(request, object_id)
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
            "change_url": instance_url(obj, "change"),
            "is_failed": obj.status == TriggerStatus.FAILED,
            "failure_kind": failure_kind(obj),
            "version": obj.workflow_version.version,
            "newer_version": newer.version if newer is not None else None,
            "node_in_newer": node_in_newer,
            "can_edit_payload": request.user.has_perm(EDIT_PAYLOAD_PERMISSION),
        }
        return TemplateResponse(
            request, "admin/triggers/triggerinstance/retry_confirm.html", context
        )

    def retry_latest_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        def retry_latest(obj: TriggerInstance, actor: str) -> Outcome:
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
        if not (can_operate(request) and request.user.has_perm(EDIT_PAYLOAD_PERMISSION)):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self.missing_redirect(request, object_id)
        change_url = instance_url(obj, "change")
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

    def missing_redirect(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Django's own answer for an object that does not exist (a message, the index)."""
        return self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
            request, self.opts, object_id
        )

    def _operate(
        self,
        request: HttpRequest,
        object_id: str,
        operation: Callable[[TriggerInstance, str], Outcome],
        *,
        failed: str,
    ) -> HttpResponse:
        """A button: POST only (CSRF checked by admin_view), operate permission, then
        ``operation(instance, actor)``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not can_operate(request):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self.missing_redirect(request, object_id)
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
        return HttpResponseRedirect(instance_url(obj, "change"))

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
