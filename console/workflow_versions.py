"""A workflow's versions in the console: the history on the workflow's page (message,
author, time), a diff between any two versions, and "restore as new version" behind a
confirmation page. Reads and the restore go through workflows.version_history, as the
API's do; a restore needs the permission to change the workflow."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

from notifyflow.errors import ApplicationError
from workflows.models import Workflow, WorkflowVersion
from workflows.version_history import (
    workflow_version_diff,
    workflow_version_get,
    workflow_version_restore,
)

from .support import ReadOnlyAdminMixin, log_admin_change, pretty_json, timestamp_column

# Restoring writes a new version: what saving the definition needs.
RESTORE_PERMISSION = "workflows.change_workflow"
DIFF_URL = "admin:workflows_workflow_versions_diff"
RESTORE_URL = "admin:workflows_workflow_version_restore"


def diff_url(workflow_id: Any, *, old: int | None = None, new: int | None = None) -> str:
    url = reverse(DIFF_URL, args=[quote(workflow_id)])
    query = {name: value for name, value in (("old", old), ("new", new)) if value is not None}
    return f"{url}?{urlencode(query)}" if query else url


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """Each line of a unified diff with the CSS class the templates colour it by."""
    lines = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            kind = "nf-diff-file"
        elif line.startswith("@@"):
            kind = "nf-diff-hunk"
        elif line.startswith("+"):
            kind = "nf-diff-add"
        elif line.startswith("-"):
            kind = "nf-diff-del"
        else:
            kind = "nf-diff-same"
        lines.append((kind, line))
    return lines


class WorkflowVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The version history on the workflow's page, newest first."""

    model = WorkflowVersion
    fk_name = "workflow"
    verbose_name = "version"
    verbose_name_plural = "version history"
    fields = ("version", "message", "created", "created_by", "definition_json", "diff_link")
    readonly_fields = (*fields, "restore_link")
    ordering = ("-version",)
    extra = 0
    max_num = 0
    can_delete = False
    created = timestamp_column("created_at", "created")

    def get_queryset(self, request: HttpRequest) -> Any:
        # The workflow of each row says which version is current (one join, no query per row).
        return super().get_queryset(request).select_related("workflow")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_fields(request, obj)
        if request.user.has_perm(RESTORE_PERMISSION):
            return (*fields, "restore_link")
        return fields

    @admin.display(description="definition")
    def definition_json(self, obj: WorkflowVersion) -> SafeString:
        nodes = obj.definition.get("nodes", [])
        return format_html(
            "<details><summary>{} node(s), {} edge(s)</summary>{}</details>",
            len(nodes),
            len(obj.definition.get("edges", [])),
            pretty_json(obj.definition),
        )

    @admin.display(description="changes")
    def diff_link(self, obj: WorkflowVersion) -> SafeString:
        old = obj.version - 1 if obj.version > 1 else None
        label = f"diff v{old} → v{obj.version}" if old else f"v{obj.version} in full"
        return format_html(
            '<a class="nf-version-diff" href="{}">{}</a>',
            diff_url(obj.workflow_id, old=old or obj.version, new=obj.version),
            label,
        )

    @admin.display(description="restore")
    def restore_link(self, obj: WorkflowVersion) -> SafeString | str:
        if obj.pk == obj.workflow.current_version_id:
            return mark_safe('<strong class="nf-version-current">current</strong>')
        url = reverse(RESTORE_URL, args=[quote(obj.workflow_id), obj.version])
        return format_html(
            '<a class="nf-version-restore" href="{}">Restore as new version…</a>', url
        )


class VersionDiffForm(forms.Form):
    """Two of the workflow's versions: the diff goes from ``old`` to ``new``."""

    old = forms.TypedChoiceField(coerce=int, label="From")
    new = forms.TypedChoiceField(coerce=int, label="To")

    def __init__(self, *args: Any, versions: list[WorkflowVersion], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(v.version, _version_choice(v)) for v in versions]
        for name in ("old", "new"):
            cast(forms.TypedChoiceField, self.fields[name]).choices = choices


def _version_choice(version: WorkflowVersion) -> str:
    text = f"v{version.version}"
    if version.message:
        text += f" — {version.message[:60]}"
    return text


class WorkflowVersionPagesMixin(admin.ModelAdmin):
    """The diff page and the restore confirmation of the workflow admin."""

    def get_urls(self) -> list:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        # Before the stock URLs: "<path:object_id>/" would swallow ".../versions/diff/".
        return [
            path(
                "<path:object_id>/versions/diff/",
                self.admin_site.admin_view(self.versions_diff_view),
                name=f"{prefix}_versions_diff",
            ),
            path(
                "<path:object_id>/versions/<int:version>/restore/",
                self.admin_site.admin_view(self.version_restore_view),
                name=f"{prefix}_version_restore",
            ),
        ] + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "nf_versions_diff_url": diff_url(unquote(object_id))}
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def versions_diff_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET ``old`` and ``new`` (two version numbers; the current version and the one
        before it by default): the unified diff between them."""
        workflow = self.get_object(request, unquote(object_id))
        if workflow is None:
            return self._missing(request, object_id)
        if not self.has_view_permission(request, workflow):
            raise PermissionDenied
        versions = list(WorkflowVersion.objects.filter(workflow=workflow).defer("definition"))
        newest = versions[0].version if versions else 1
        form = VersionDiffForm(
            request.GET or {"old": max(newest - 1, 1), "new": newest}, versions=versions
        )
        diff = None
        if form.is_valid():
            old, new = (
                workflow_version_get(workflow=workflow, version=form.cleaned_data[name])
                for name in ("old", "new")
            )
            # One version on both sides: its whole definition, as added lines.
            against = None if old.version == new.version else old
            diff = workflow_version_diff(workflow=workflow, version=new, against=against)
        context = {
            **self._page_context(request, workflow, f"Versions of {workflow.key}: diff"),
            "form": form,
            "diff": diff,
            "lines": diff_lines(diff or ""),
        }
        return TemplateResponse(request, "admin/workflows/workflow/version_diff.html", context)

    def version_restore_view(
        self, request: HttpRequest, object_id: str, version: int
    ) -> HttpResponse:
        """GET: what restoring ``version`` would change (the diff from the current
        version). POST (the confirmation): a new version with its definition."""
        workflow = self.get_object(request, unquote(object_id))
        if workflow is None:
            return self._missing(request, object_id)
        if not self.has_change_permission(request, workflow):
            raise PermissionDenied
        change_url = reverse("admin:workflows_workflow_change", args=[quote(workflow.pk)])
        if request.method == "POST":
            return self._restore(request, workflow, version, change_url)
        try:
            source = workflow_version_get(workflow=workflow, version=version)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(change_url)
        current = workflow.current_version
        diff = workflow_version_diff(workflow=workflow, version=source, against=current)
        context = {
            **self._page_context(request, workflow, f"Restore v{version} of {workflow.key}?"),
            "change_url": change_url,
            "source": source,
            "current": current,
            "lines": diff_lines(diff),
            "unchanged": diff == "",
        }
        return TemplateResponse(
            request, "admin/workflows/workflow/version_restore_confirm.html", context
        )

    def _restore(
        self, request: HttpRequest, workflow: Workflow, version: int, change_url: str
    ) -> HttpResponse:
        try:
            restored = workflow_version_restore(
                workflow=workflow, version=version, actor=request.user.get_username()
            )
        except ApplicationError as exc:
            self.message_user(request, f"Not restored: {exc.message}", messages.ERROR)
            return HttpResponseRedirect(change_url)
        # A restore always leaves a current version: the one it added.
        number = cast(WorkflowVersion, restored.current_version).version
        log_admin_change(request, [restored], f"Restored v{version} as v{number}")
        self.message_user(
            request,
            f"Restored v{version} as the new current version v{number}. Running instances "
            "keep the version they started on.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(change_url)

    def _page_context(self, request: HttpRequest, workflow: Workflow, title: str) -> dict:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": workflow,
            "title": title,
            "change_url": reverse("admin:workflows_workflow_change", args=[quote(workflow.pk)]),
        }

    def _missing(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Django's own answer for an object that does not exist (a message, the index)."""
        return self._get_obj_does_not_exist_redirect(  # type: ignore[attr-defined]
            request, self.opts, object_id
        )


__all__ = [
    "VersionDiffForm",
    "WorkflowVersionInline",
    "WorkflowVersionPagesMixin",
    "diff_lines",
]
