"""Operator console for trigger instances: one admin composed of a mixin per concern.

Instances are read-only here; the only writes are the operator actions (list actions in
``actions``, the buttons of an instance's page in ``pages``), which call
``triggers.services`` (the one way in, as the API does) with the operator as the audited
actor, and leave a LogEntry for the admin's "Recent actions".
"""

from __future__ import annotations

from django.contrib import admin

from triggers.models import TriggerInstance

from ..support import (
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    timestamp_column,
)
from .actions import InstanceActionsMixin
from .columns import (
    HasErrorFilter,
    InstanceErrorKindFilter,
    InstanceListMixin,
    RecipientFilter,
    WaitingFilter,
)
from .detail import InstanceDetailMixin
from .inlines import InboxInline, StepLogInline
from .pages import InstancePagesMixin


@admin.register(TriggerInstance)
class TriggerInstanceAdmin(
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    InstancePagesMixin,
    InstanceActionsMixin,
    InstanceDetailMixin,
    InstanceListMixin,
):
    list_display = (
        "short_id",
        "idempotency_key_short",
        "status_display",
        "workflow",
        "node",
        "tries",
        "due",
        "error_kind_display",
        "last_error_short",
        "created",
    )
    list_display_links = ("short_id",)
    list_filter = (
        "status",
        WaitingFilter,
        HasErrorFilter,
        InstanceErrorKindFilter,
        "workflow",
        RecipientFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("workflow",)
    changelist_defer = ("payload", "vars")
    # Every index on the table leads with created_at after the filter columns; sorting
    # by anything else would be a sort of the whole (filtered) table per page.
    sortable_by = ("created",)
    ordering = ("-created_at",)
    search_fields = ("idempotency_key",)
    search_help_text = (
        "Exact instance id (UUID), exact idempotency key, or a recipient: their id, or "
        "an email address or phone number a delivery was sent to."
    )
    # The status history follows them, rendered by the change form (detail.py): it
    # merges two tables, which no inline can.
    inlines = (StepLogInline, InboxInline)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "workflow",
                    "version_display",
                    "idempotency_key_display",
                    "recipient_display",
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
        "idempotency_key_display",
        "recipient_display",
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
