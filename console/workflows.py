"""Operator console for workflows: a definition editor that saves through
workflows.services.workflow_save, the version history with diffs and restore
(console.workflow_versions), a drawing of the DAG, activate / deactivate, pause /
resume (triggers.services) and a preview page (executions.preview: nothing sent,
nothing written)."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString

from executions.preview import workflow_preview
from notifyflow.errors import ApplicationError
from translations.locales import is_locale
from triggers.services import workflow_pause, workflow_resume
from workflows.concurrency import MAX_LIMIT, Concurrency, key_template_problem
from workflows.definition import (
    DefinitionError,
    DefinitionProblem,
    node_types,
    validate_definition,
)
from workflows.definition.translation_keys import check_translation_keys
from workflows.diagram import to_mermaid
from workflows.models import Workflow
from workflows.services import workflow_save, workflow_set_active

from .drawing import draw_workflow_svg
from .support import (
    LeanChangeListMixin,
    can_operate,
    log_admin_change,
    pretty_json,
    timestamp_column,
)
from .workflow_authoring import WorkflowAuthoringMixin
from .workflow_versions import WorkflowVersionInline, WorkflowVersionPagesMixin

NEW_DEFINITION = {"entry_node_id": "", "nodes": [], "edges": []}


def problem_message(problem: DefinitionProblem) -> str:
    """One form error per problem, naming the node (when there is one) and the field."""
    where = (
        f"Node “{problem.node}”, field {problem.field}"
        if problem.node
        else (f"Field {problem.field}")
    )
    return f"{where}: {problem.message}"


class DefinitionJSONField(forms.JSONField):
    """JSON in a textarea, indented for editing."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


SLUG = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")


class CategoriesField(forms.Field):
    """A list of category slugs typed as ``marketing, product-news``: order kept (the
    first is the unsubscribe scope), duplicates dropped, each a lowercase slug."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value or ""

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, list):
            items = [str(item).strip() for item in value]
        else:
            items = [item.strip() for item in (value or "").split(",")]
        seen: list[str] = []
        for item in items:
            if item and item not in seen:
                seen.append(item)
        return seen

    def validate(self, value: list[str]) -> None:
        bad = [item for item in value if not SLUG.match(item) or len(item) > 100]
        if bad:
            raise forms.ValidationError(
                "Not a category slug (lowercase letters, digits, - or _): %(bad)s",
                code="invalid_category",
                params={"bad": ", ".join(repr(item) for item in bad)},
            )


def _definition_help(types: tuple[str, ...]) -> str:
    return (
        "{entry_node_id, nodes: [{id, type, config}], edges: [{from, to, condition?}]}. "
        f"Node types: {', '.join(types)}. Saving a changed definition adds a new "
        "version; running instances keep the version they started on. Node configs, "
        "templates and three complete examples: docs/workflows.md; the JSON Schema "
        "(WorkflowDefinition): /api/docs/."
    )


class WorkflowForm(forms.ModelForm):
    categories = CategoriesField(
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "marketing, product"}),
        help_text=(
            "Comma-separated category slugs, most significant first: recipients' "
            "preferences can opt out of a category, and an unsubscribe link opts out of "
            "the first one (the workflow itself when there is none)."
        ),
    )
    concurrency_limit = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        help_text="At most this many steps of its instances execute at once (per "
        "concurrency key); waiting and parked instances do not count. Empty: no limit.",
    )
    definition = DefinitionJSONField(
        widget=forms.Textarea(
            attrs={
                "rows": 26,
                "class": "vLargeTextField nf-code",
                "spellcheck": "false",
                "style": "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;"
                "font-size:12px;width:100%;max-width:60em",
            }
        ),
        help_text=lazy(lambda: _definition_help(node_types.names()), str)(),
    )

    class Meta:
        model = Workflow
        fields = (
            "key",
            "name",
            "is_active",
            "priority",
            "critical",
            "categories",
            "concurrency_limit",
            "concurrency_key",
            "default_locale",
        )
        help_texts = {
            "default_locale": "The locale its sends render in when neither the device nor "
            "the recipient names one (BCP 47: en, pt-BR). Empty: NOTIFYFLOW_DEFAULT_LOCALE. "
            "Its templates' translation keys must be in this locale's catalogues.",
            "priority": "Its lane: each is its own queue and a plain worker takes critical "
            "work first (password resets: critical; newsletters: bulk). A list fan-out of "
            "a normal workflow runs in bulk. Applies to instances created from now on.",
            "concurrency_key": "Optional Liquid template over payload.*, recipient.id, "
            "trigger.idempotency_key and workflow.key, rendered when an instance is "
            "created: the limit applies per rendered key. Empty: one limit for the whole "
            "workflow.",
            "critical": "Security and transactional mail (password resets, receipts): "
            "sent whatever the recipient's preferences and quiet hours say, with no "
            "unsubscribe link.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "definition" not in self.initial:
            current = self.instance.definition if self.instance.pk else None
            self.initial["definition"] = current if current is not None else NEW_DEFINITION

    def clean_concurrency_key(self) -> str:
        """The API's check (``key_template_problem``)."""
        source = self.cleaned_data.get("concurrency_key") or ""
        problem = key_template_problem(source)
        if problem is not None:
            raise forms.ValidationError(problem, code="invalid_template")
        return source

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if cleaned.get("concurrency_key") and cleaned.get("concurrency_limit") is None:
            self.add_error(
                "concurrency_key", forms.ValidationError("needs a limit", code="needs_limit")
            )
        locale = cleaned.get("default_locale") or ""
        if locale and not is_locale(locale):
            self.add_error("default_locale", forms.ValidationError("not a locale (en, pt-BR)"))
        elif cleaned.get("definition") and cleaned.get("key"):
            # What workflow_save refuses after the validator: keys the default lacks.
            problems = check_translation_keys(
                cleaned["definition"]["nodes"], namespace=cleaned["key"], locale=locale
            )
            for problem in problems:
                self.add_error(
                    "definition", forms.ValidationError(problem_message(problem), problem.code)
                )
        return cleaned

    def clean_definition(self) -> dict[str, Any]:
        """The same validator workflow_save runs, so the errors land on the form (each
        naming node and field) instead of a 500; nothing is saved when it fails."""
        try:
            return validate_definition(self.cleaned_data["definition"])
        except DefinitionError as exc:
            raise forms.ValidationError(
                [forms.ValidationError(problem_message(p), code=p.code) for p in exc.errors]
            ) from exc


class PreviewForm(forms.Form):
    payload = forms.JSONField(
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 12, "class": "vLargeTextField"}),
        help_text="The trigger payload, a JSON object.",
    )
    version = forms.IntegerField(
        required=False, min_value=1, help_text="Empty: the current version."
    )
    recipient_id = forms.CharField(
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="A recipient's id: render for them and show what each node would do for "
        "them (preferences, quiet hours, devices, gates). Empty: no recipient.",
    )

    def clean_payload(self) -> dict[str, Any]:
        payload = self.cleaned_data["payload"]
        if not isinstance(payload, dict):
            raise forms.ValidationError("must be a JSON object")
        return payload


@admin.register(Workflow)
class WorkflowAdmin(
    WorkflowAuthoringMixin, WorkflowVersionPagesMixin, LeanChangeListMixin, admin.ModelAdmin
):
    form = WorkflowForm
    change_form_template = "admin/executions/workflow_change_form.html"
    list_display = (
        "key",
        "name",
        "is_active",
        "priority",
        "critical",
        "categories_display",
        "version_display",
        "updated",
        "is_paused",
    )
    list_filter = ("is_active", "is_paused", "priority", "critical")
    list_select_related = ("current_version",)
    changelist_defer = ("current_version__definition",)
    search_fields = ("key", "name")
    actions = ("activate", "deactivate", "pause", "resume")
    inlines = (WorkflowVersionInline,)
    readonly_fields = (
        "version_display",
        "drawing",
        "mermaid",
        "definition_json",
        "created",
        "updated",
    )
    created = timestamp_column("created_at", "created")
    updated = timestamp_column("updated_at", "updated", sortable=True)

    def get_fieldsets(self, request: HttpRequest, obj: Workflow | None = None) -> list:
        editing = (
            self.has_add_permission(request)
            if obj is None
            else self.has_change_permission(request, obj)
        )
        head: tuple[str, ...] = (
            "key",
            "name",
            "is_active",
            "priority",
            "critical",
            "categories",
            "default_locale",
        )
        if obj is not None:
            head += ("version_display", "created", "updated")
        fieldsets: list = [(None, {"fields": head})]
        fieldsets.append(("Concurrency", {"fields": ("concurrency_limit", "concurrency_key")}))
        fieldsets.append(
            ("Definition", {"fields": ("definition" if editing else "definition_json",)})
        )
        if obj is not None:
            fieldsets.append(("Graph (current version)", {"fields": ("drawing", "mermaid")}))
        return fieldsets

    def save_model(
        self, request: HttpRequest, obj: Workflow, form: forms.ModelForm, change: bool
    ) -> None:
        with transaction.atomic():
            saved = workflow_save(
                key=form.cleaned_data["key"],
                name=form.cleaned_data["name"],
                is_active=form.cleaned_data["is_active"],
                definition=form.cleaned_data["definition"],
                actor=request.user.get_username(),
                workflow=obj if change else None,
                concurrency=Concurrency(
                    limit=form.cleaned_data.get("concurrency_limit"),
                    key=form.cleaned_data.get("concurrency_key") or "",
                ),
                priority=form.cleaned_data["priority"],
                default_locale=form.cleaned_data.get("default_locale") or "",
            )
            # The send settings are not versioned: they apply from the next
            # step of every instance, so they are written beside the definition's save.
            settings = {
                "critical": form.cleaned_data.get("critical", False),
                "categories": form.cleaned_data.get("categories") or [],
            }
            Workflow.objects.filter(pk=saved.pk).update(**settings)
        obj.critical, obj.categories = settings["critical"], settings["categories"]
        obj.concurrency_limit, obj.concurrency_key = saved.concurrency_limit, saved.concurrency_key
        obj.priority, obj.default_locale = saved.priority, saved.default_locale
        # The admin goes on with ``obj`` (change message, redirect): make it the saved row.
        obj.pk, obj.current_version = saved.pk, saved.current_version
        obj.created_at, obj.updated_at = saved.created_at, saved.updated_at
        obj._state.adding = False
        obj._state.db = saved._state.db

    @admin.display(description="categories")
    def categories_display(self, obj: Workflow) -> str:
        return ", ".join(obj.categories or []) or "-"

    @admin.display(description="version")
    def version_display(self, obj: Workflow) -> str:
        version = obj.current_version if obj.current_version_id else None
        return f"v{version.version}" if version is not None else "-"

    @admin.display(description="graph")
    def drawing(self, obj: Workflow) -> SafeString:
        return draw_workflow_svg(obj.definition)

    @admin.display(description="Mermaid")
    def mermaid(self, obj: Workflow) -> SafeString | str:
        """The graph as Mermaid text, to paste into docs (GET .../diagram/ serves it too,
        and DOT)."""
        version = obj.current_version if obj.current_version_id else None
        if version is None:
            return "-"
        return format_html(
            '<pre class="nf-mermaid" style="white-space:pre;max-width:60em;overflow:auto;'
            'user-select:all">{}</pre>',
            to_mermaid(version.definition, title=f"{obj.key} v{version.version}"),
        )

    @admin.display(description="definition")
    def definition_json(self, obj: Workflow) -> SafeString:
        return pretty_json(obj.definition)

    @admin.action(description="Activate selected workflows", permissions=["change"])
    def activate(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_active(request, queryset, True)

    @admin.action(description="Deactivate selected workflows", permissions=["change"])
    def deactivate(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_active(request, queryset, False)

    def _set_active(self, request: HttpRequest, queryset: QuerySet, is_active: bool) -> None:
        changed = 0
        for workflow in queryset.exclude(is_active=is_active):
            workflow_set_active(workflow=workflow, is_active=is_active)
            # For the admin's "Recent actions" and the workflow's history.
            self.log_change(request, workflow, "Activated" if is_active else "Deactivated")
            changed += 1
        state = "active" if is_active else "inactive"
        self.message_user(request, f"{changed} workflow(s) set {state}.", messages.SUCCESS)

    # --- pause / resume (they act on the workflow's instances: resume dispatches the due
    # ones) ------------------------------------------------------------------------------

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

    # --- preview ------------------------------------------------------------------------

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
            raise PermissionDenied
        form = PreviewForm(request.POST or None)
        result = None
        if request.method == "POST" and form.is_valid():
            try:
                result = workflow_preview(
                    key=workflow.key,
                    payload=form.cleaned_data["payload"],
                    version=form.cleaned_data["version"],
                    recipient_id=form.cleaned_data["recipient_id"] or None,
                )
            except ApplicationError as exc:
                field = exc.field if exc.field in ("version", "recipient_id") else None
                form.add_error(field, exc.message)
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
