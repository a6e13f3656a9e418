"""Authoring in the console: the editor checks the definition as it is typed and
redraws the diagram without a save, and a workflow can be test-sent to a chosen
recipient.

- ``POST <workflow>/authoring/check/`` (and ``add/authoring/check/`` for a new one)
  takes ``{definition: "<the editor's text>"}`` and answers ``{ok, problems: [{node,
  field, message, code}], svg}``: the problems of the validator a save runs
  (``validate_definition``), text that is not JSON as one problem naming its line and
  column, and the drawing of a valid definition (``svg`` null otherwise: the page keeps
  its last drawing). Nothing is saved. Called by ``notifyflow/workflow_authoring.js``,
  which debounces the textarea; without JavaScript the save's own errors remain.
- ``<workflow>/test-send/``: a recipient id, a payload and optionally a locale;
  creates a real instance marked test (``triggers.services.workflow_test_send``, the
  API's service) and opens it.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from notifyflow.errors import ApplicationError
from recipients.ids import MAX_RECIPIENT_ID_LENGTH
from triggers.services import workflow_test_send
from workflows.definition import DefinitionError, validate_definition

from .drawing import draw_workflow_svg
from .support import can_operate

CHECK_URL = "admin:workflows_workflow_authoring_check"
NEW_CHECK_URL = "admin:workflows_workflow_authoring_check_new"
TEST_SEND_URL = "admin:workflows_workflow_test_send"


def definition_check(text: str) -> dict[str, Any]:
    """``{ok, problems, svg}`` for the editor's ``text``: every problem the save's
    validator names (node, field, message, code), or one ``invalid_json`` problem with
    the line and column; the drawing only of a valid definition."""
    try:
        definition = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = {
            "node": None,
            "field": "definition",
            "code": "invalid_json",
            "message": f"not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}",
        }
        return {"ok": False, "problems": [problem], "svg": None}
    try:
        valid = validate_definition(definition)
    except DefinitionError as exc:
        return {"ok": False, "problems": [p.as_dict() for p in exc.errors], "svg": None}
    return {"ok": True, "problems": [], "svg": str(draw_workflow_svg(valid))}


class TestSendForm(forms.Form):
    recipient_id = forms.CharField(
        max_length=MAX_RECIPIENT_ID_LENGTH,
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="An existing recipient's id: the workflow runs for real and sends to them.",
    )
    payload = forms.JSONField(
        initial=dict,
        # Not required: {} is an empty value to a JSONField, and an empty payload is one.
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, "class": "vLargeTextField"}),
        help_text="The trigger payload, a JSON object.",
    )
    locale = forms.CharField(
        max_length=35,
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "pt-BR"}),
        help_text="Render every message in this locale, over the recipient's and their "
        "devices' own. Empty: as a send would choose.",
    )

    def clean_payload(self) -> dict[str, Any]:
        payload = self.cleaned_data["payload"]
        if payload is None:
            return {}
        if not isinstance(payload, dict):
            raise forms.ValidationError("must be a JSON object", code="not_an_object")
        return payload


class WorkflowAuthoringMixin(admin.ModelAdmin):
    """The check endpoint and the test-send page of the workflow admin."""

    def get_urls(self) -> list:
        # Before the stock URLs: "<path:object_id>/" would swallow them.
        return [
            path(
                "add/authoring/check/",
                self.admin_site.admin_view(self.authoring_check_view),
                name="workflows_workflow_authoring_check_new",
            ),
            path(
                "<path:object_id>/authoring/check/",
                self.admin_site.admin_view(self.authoring_check_view),
                name="workflows_workflow_authoring_check",
            ),
            path(
                "<path:object_id>/test-send/",
                self.admin_site.admin_view(self.test_send_view),
                name="workflows_workflow_test_send",
            ),
        ] + super().get_urls()

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "nf_check_url": reverse(NEW_CHECK_URL)}
        return super().add_view(request, form_url, extra_context=extra)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {
            **(extra_context or {}),
            "nf_check_url": reverse(CHECK_URL, args=[object_id]),
            "nf_test_send_url": reverse(TEST_SEND_URL, args=[object_id])
            if can_operate(request)
            else None,
        }
        return super().change_view(request, object_id, form_url, extra_context=extra)

    @staticmethod
    def _check_body(request: HttpRequest) -> str | None:
        try:
            body = json.loads(request.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            return None
        text = body.get("definition") if isinstance(body, dict) else None
        return text if isinstance(text, str) else None

    def authoring_check_view(
        self, request: HttpRequest, object_id: str | None = None
    ) -> HttpResponse:
        """POST ``{definition: text}`` -> ``{ok, problems, svg}`` (``definition_check``);
        400 when the body is not that. Saves nothing."""
        return require_POST(self._check)(request, object_id)

    def _check(self, request: HttpRequest, object_id: str | None) -> HttpResponse:
        workflow = self.get_object(request, unquote(object_id)) if object_id else None
        allowed = (
            self.has_change_permission(request, workflow)
            if workflow is not None
            else self.has_add_permission(request)
        )
        if not allowed:
            raise PermissionDenied
        text = self._check_body(request)
        if text is None:
            return JsonResponse(
                {"code": "invalid", "field": "definition", "message": "definition: a string"},
                status=400,
            )
        return JsonResponse(definition_check(text))

    def test_send_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET the form; POST creates the test instance and opens its page (the form
        again with the error on its field: unknown recipient, inactive workflow...)."""
        workflow = self.get_object(request, unquote(object_id))
        if workflow is None:
            raise PermissionDenied
        if not (self.has_view_permission(request, workflow) and can_operate(request)):
            raise PermissionDenied
        form = TestSendForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                instance = workflow_test_send(
                    workflow=workflow,
                    recipient_id=form.cleaned_data["recipient_id"],
                    payload=form.cleaned_data["payload"],
                    actor=request.user.get_username(),
                    locale=form.cleaned_data["locale"] or None,
                )
            except ApplicationError as exc:
                field = exc.field if exc.field in form.fields else None
                form.add_error(field, exc.message)
            else:
                self.message_user(
                    request, f"Test send started for {instance.recipient_id}.", messages.SUCCESS
                )
                url = reverse("admin:triggers_triggerinstance_change", args=[quote(instance.pk)])
                return HttpResponseRedirect(url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": workflow,
            "title": f"Test send {workflow.key}",
            "form": form,
        }
        return TemplateResponse(request, "admin/workflows/workflow/test_send.html", context)
