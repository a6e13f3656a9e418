"""Operator console for message catalogues: edit one's messages as JSON (checked by the
service the API uses) and see the keys it lacks against the default locale's catalogue
of the same namespace."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from notifyflow.errors import ApplicationError
from translations.locales import flatten, locale_check, messages_check
from translations.models import Catalogue
from translations.selectors import catalogue_gaps
from translations.services import catalogue_delete, catalogue_put, namespace_check

from .support import timestamp_column


class CatalogueForm(forms.ModelForm):
    messages = forms.JSONField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family:monospace"}),
        help_text='Keys to texts; nest objects for dotted keys; {"one": ..., "other": ...} is '
        "a plural message; %(name)s takes a value passed to the t filter.",
    )

    class Meta:
        model = Catalogue
        fields = ("locale", "namespace", "messages")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        checks = (
            ("locale", locale_check),
            ("namespace", namespace_check),
            ("messages", messages_check),
        )
        for name, check in checks:
            if name in cleaned:
                try:
                    check(cleaned[name])
                except ApplicationError as exc:
                    self.add_error(name, forms.ValidationError(exc.message, code=exc.code))
        return cleaned


@admin.register(Catalogue)
class CatalogueAdmin(admin.ModelAdmin):
    form = CatalogueForm
    list_display = ("namespace", "locale", "keys", "updated", "updated_by")
    list_filter = ("locale",)
    search_fields = ("namespace",)
    readonly_fields = ("lacks", "updated_by")
    updated = timestamp_column("updated_at", "updated")

    @admin.display(description="keys")
    def keys(self, obj: Catalogue) -> int:
        return len(flatten(obj.messages))

    @admin.display(description="lacks against the default locale")
    def lacks(self, obj: Catalogue) -> SafeString:
        if obj.pk is None:
            return format_html("{}", "—")
        gaps = catalogue_gaps(obj)
        if not gaps:
            return format_html("{}", "nothing")
        return format_html_join(", ", "<code>{}</code>", ((key,) for key in gaps))

    def save_model(self, request: HttpRequest, obj: Catalogue, form: Any, change: bool) -> None:
        saved, _ = catalogue_put(
            locale=obj.locale,
            namespace=obj.namespace,
            messages=obj.messages,
            actor=f"console:{request.user.get_username()}",
        )
        obj.pk, obj.updated_at, obj.updated_by = saved.pk, saved.updated_at, saved.updated_by

    def delete_model(self, request: HttpRequest, obj: Catalogue) -> None:
        catalogue_delete(locale=obj.locale, namespace=obj.namespace)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Catalogue]) -> None:
        for catalogue in queryset:
            catalogue_delete(locale=catalogue.locale, namespace=catalogue.namespace)
