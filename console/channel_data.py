"""A recipient's channel data on their console page: push devices (provider, app,
locale, time zone, the token's last characters), chat connections (a Slack channel or
user, or a webhook's host only - never its URL) and the audit of every removal.

Read-only for operators. An administrator (``recipients.delete_pushdevice`` /
``delete_chatconnection``) may tick a row's "delete" box and save: the row goes through
the same service as ``DELETE`` over the API (``recipients.channel_data``), audited as
``admin:<username>``, with a ``recipient.device_removed`` (or ``…connection_removed``)
status event - the customer's backend did not ask for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from recipients.channel_data import chat_connection_remove, push_device_remove
from recipients.models import ChannelDataRemoval, ChatConnection, PushDevice

from .support import ReadOnlyAdminMixin, timestamp_column
from .visible import visible_id


class _DeleteThroughService(BaseInlineFormSet):
    """An inline formset whose deletions call the service (``remove``) as ``actor``."""

    remove: Callable[..., None]
    actor = "admin"

    def delete_existing(self, obj: Any, commit: bool = True) -> None:
        if commit:
            type(self).remove(obj.recipient_id, obj.pk, actor=self.actor, announce=True)


def _remove_device(recipient_id: str, pk: Any, **kwargs: Any) -> None:
    push_device_remove(recipient_id=recipient_id, device_id=pk, **kwargs)


def _remove_connection(recipient_id: str, pk: Any, **kwargs: Any) -> None:
    chat_connection_remove(recipient_id=recipient_id, connection_id=pk, **kwargs)


class _ChannelDataInline(admin.TabularInline):
    """Shown, never edited here (the API writes channel data); deleted by an
    administrator through the service."""

    fk_name = "recipient"
    extra = 0
    max_num = 0
    formset = _DeleteThroughService
    remove: Callable[..., None]
    created = timestamp_column("created_at", "created")

    def get_formset(self, request: HttpRequest, obj: Model | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        actor = f"admin:{request.user.get_username()}"
        # staticmethod: a plain function stored on a class would be bound to the formset.
        return type(
            formset.__name__,
            (formset,),
            {"actor": actor, "remove": staticmethod(type(self).remove)},
        )

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class PushDeviceInline(_ChannelDataInline):
    model = PushDevice
    verbose_name_plural = "push devices"
    fields = ("provider", "app", "locale", "timezone", "token_end", "created")
    readonly_fields = fields
    ordering = ("created_at", "id")
    remove = staticmethod(_remove_device)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The token is shown by its end only; a Web Push device's keys are not shown.
        return super().get_queryset(request).defer("keys")

    @admin.display(description="token")
    def token_end(self, obj: PushDevice) -> Any:
        return visible_id(obj.short_token)


class ChatConnectionInline(_ChannelDataInline):
    model = ChatConnection
    verbose_name_plural = "chat connections"
    fields = ("provider", "target", "created")
    readonly_fields = fields
    ordering = ("created_at", "id")
    remove = staticmethod(_remove_connection)

    @admin.display(description="channel, user or webhook host")
    def target(self, obj: ChatConnection) -> Any:
        if obj.webhook_url:
            return f"webhook: {obj.webhook_host}"
        if obj.channel:
            return visible_id(f"channel {obj.channel}")
        return visible_id(f"user {obj.user}")


class ChannelDataRemovalInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Every device or connection removed - a dead token, a dead webhook, a replacement
    or deletion - newest first: audit, never edited."""

    model = ChannelDataRemoval
    fk_name = "recipient"
    verbose_name = "removed device or connection"
    verbose_name_plural = "removed devices and connections"
    fields = ("channel", "provider", "target", "reason", "source", "at_display")
    readonly_fields = fields
    ordering = ("-at", "-id")
    extra = 0
    max_num = 0
    can_delete = False
    at_display = timestamp_column("at", "at")


# On a recipient's page, not on the add page (a new person has none).
CHANNEL_DATA_INLINES = (PushDeviceInline, ChatConnectionInline, ChannelDataRemovalInline)
