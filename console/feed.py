"""Operator console for the in-app feed: a recipient's feed items, newest
first (the changelist filtered by recipient, linked from the recipient's page, which
shows the counts and the latest items). Read-only: items are written by ``in_app``
nodes and changed by the recipient, through the feed API."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from feed.models import FeedItem
from feed.services import feed_counts

from .support import (
    InputListFilter,
    LargeTableAdminMixin,
    LeanChangeListMixin,
    ReadOnlyAdminMixin,
    instance_link,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)
from .support import recipient_link as link_to_recipient


class FeedRecipientFilter(InputListFilter):
    """One recipient's feed (feed_recipient_newest leads with the recipient)."""

    title = "recipient (id)"
    parameter_name = "recipient"
    field_path = "recipient_id"


def feed_state(item: FeedItem) -> SafeString:
    """archived, unread, read (and unseen) as a badge."""
    if item.archived_at is not None:
        return status_badge("cancelled", "archived")
    if item.read_at is not None:
        return status_badge("completed", "read")
    return status_badge("running", "unread" if item.seen_at else "unread, unseen")


def recipient_feed_url(recipient_id: str) -> str:
    return reverse("admin:feed_feeditem_changelist") + "?" + urlencode({"recipient": recipient_id})


def feed_summary(recipient_id: str) -> SafeString:
    """The recipient's counts (its counter row) and a link to its feed."""
    counts = feed_counts(recipient_id=recipient_id)
    return format_html(
        "<p><strong>{}</strong> unread, <strong>{}</strong> unseen (archived items not "
        'counted). <a href="{}">The whole feed →</a></p>',
        counts.unread_count,
        counts.unseen_count,
        recipient_feed_url(recipient_id),
    )


@admin.register(FeedItem)
class FeedItemAdmin(
    LeanChangeListMixin, LargeTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    list_display = (
        "title_display",
        "recipient_link",
        "state",
        "category",
        "workflow",
        "node_id",
        "created",
        "read",
    )
    list_display_links = ("title_display",)
    list_filter = (FeedRecipientFilter,)
    list_select_related = ("workflow",)
    # feed_recipient_newest: a recipient's page, newest first.
    ordering = ("-created_at", "-id")
    sortable_by = ()
    search_fields = ("recipient__id",)
    search_help_text = "Exact recipient id."
    changelist_defer = ("data", "body")
    fields = (
        "id",
        "recipient_link",
        "workflow",
        "instance_display",
        "node_id",
        "title",
        "body",
        "url",
        "category",
        "data_json",
        "state",
        "created",
        "seen",
        "read",
        "archived",
    )
    readonly_fields = fields
    created = timestamp_column("created_at", "created")
    seen = timestamp_column("seen_at", "seen")
    read = timestamp_column("read_at", "read")
    archived = timestamp_column("archived_at", "archived")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        return (queryset.filter(recipient_id=term) if term else queryset), False

    @admin.display(description="title")
    def title_display(self, obj: FeedItem) -> SafeString | str:
        return truncated(obj.title, 70)

    @admin.display(description="recipient")
    def recipient_link(self, obj: FeedItem) -> SafeString:
        return link_to_recipient(obj.recipient_id)

    @admin.display(description="state")
    def state(self, obj: FeedItem) -> SafeString:
        return feed_state(obj)

    @admin.display(description="instance")
    def instance_display(self, obj: FeedItem) -> SafeString | str:
        return instance_link(obj.instance_id) if obj.instance_id else "-"

    @admin.display(description="data")
    def data_json(self, obj: FeedItem) -> SafeString | str:
        return pretty_json(obj.data) if obj.data else "-"
