"""Operator console for people: recipients with their preferences, lists,
instances, deliveries, opt-out history and channel data (``console.channel_data``), and
lists with their member counts.

Search is exact and indexed: a recipient id (the primary key), an email address
(case-insensitive, the ``recipient_email_lower`` index on ``Lower(email)``) or a phone
number (``recipient_phone``). The history on a recipient's page (opt-outs, instances,
deliveries) is read-only, the latest rows only, each list linking to the full one.
"""

from __future__ import annotations

import re
import zoneinfo

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Lower
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from executions.erasure import recipient_erase
from executions.models import Delivery
from feed.models import FeedItem
from recipients.ids import recipient_id_problem
from recipients.models import ListMembership, OptOut, Recipient, RecipientList
from triggers.models import TriggerInstance

from .channel_data import CHANNEL_DATA_INLINES
from .feed import feed_state, feed_summary, recipient_feed_url
from .support import (
    InputListFilter,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    instance_link,
    log_admin_change,
    pretty_json,
    recipient_link,
    status_badge,
    timestamp_column,
)
from .visible import visible_id

# Rows of history shown on a recipient's or a list's page; the link under each table
# opens the whole (paginated) list.
RECENT = 20
MEMBERS_SHOWN = 50

E164 = re.compile(r"^\+[1-9][0-9]{1,14}$")
_PHONE_NOISE = re.compile(r"[\s().-]")


def recipient_search(queryset: QuerySet, term: str) -> QuerySet:
    """Exact matches only, each an index lookup: id, email (case-insensitive, through
    ``Lower(email)``), phone (E.164, spaces and dashes ignored)."""
    term = term.strip()
    if not term:
        return queryset
    match = Q(pk=term)
    if "@" in term:
        match |= Q(email__isnull=False, email_lower=term.lower())
    phone = _PHONE_NOISE.sub("", term)
    if E164.match(phone):
        match |= Q(phone__isnull=False, phone=phone)
    return queryset.alias(email_lower=Lower("email")).filter(match)


def _table(headers: tuple[str, ...], rows: list[tuple], empty: str) -> SafeString:
    if not rows:
        return format_html('<p class="nf-empty">{}</p>', empty)
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows),
    )
    return format_html('<table class="nf-mini"><thead><tr>{}</tr></thead>{}</table>', head, body)


def _more_link(url: str, label: str) -> SafeString:
    return format_html('<p class="nf-more"><a href="{}">{} →</a></p>', url, label)


class RecipientForm(forms.ModelForm):
    """Contact fields, validated as the API validates them (E.164, IANA zones)."""

    class Meta:
        model = Recipient
        fields = ("id", "email", "phone", "timezone", "locale")

    def clean_phone(self) -> str | None:
        value = self.cleaned_data.get("phone")
        if not value:
            return None
        phone = _PHONE_NOISE.sub("", value)
        if not E164.match(phone):
            raise forms.ValidationError(
                f"{value!r} is not a phone number in E.164 form (+15551234567)",
                code="invalid_phone",
            )
        return phone

    def clean_timezone(self) -> str | None:
        value = (self.cleaned_data.get("timezone") or "").strip()
        if not value:
            return None
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise forms.ValidationError(
                f"{value!r} is not an IANA time zone name (e.g. Europe/Paris)",
                code="invalid_timezone",
            ) from exc
        return value

    def clean_id(self) -> str:
        # As the API: printable, and an id a path can address (recipients.ids).
        value = self.cleaned_data.get("id") or ""
        problem = recipient_id_problem(value)
        if problem is not None:
            raise forms.ValidationError(problem[1], code=problem[0])
        return value

    def clean_email(self) -> str | None:
        return self.cleaned_data.get("email") or None

    def clean_locale(self) -> str | None:
        return (self.cleaned_data.get("locale") or "").strip() or None


class ListKeyFilter(InputListFilter):
    """Members of one list (list_membership_unique leads with the list)."""

    title = "member of list (key)"
    parameter_name = "list"
    field_path = "memberships__list__key"


class MembershipInline(ReadOnlyAdminMixin, admin.TabularInline):
    """The lists a recipient belongs to (a person is on a handful)."""

    model = ListMembership
    fk_name = "recipient"
    verbose_name = "list membership"
    verbose_name_plural = "lists"
    fields = ("list_link", "since")
    readonly_fields = fields
    ordering = ("list__key",)
    extra = 0
    max_num = 0
    can_delete = False
    since = timestamp_column("created_at", "member since")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("list")

    @admin.display(description="list")
    def list_link(self, obj: ListMembership) -> SafeString:
        url = reverse("admin:recipients_recipientlist_change", args=[obj.list_id])
        return format_html(
            '<a href="{}">{}</a> {}', url, visible_id(obj.list.key), obj.list.name or ""
        )


class OptOutInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Every opt-out written into the preferences, and every reversal of one of the
    person's own (``action``), newest first: audit, never edited."""

    model = OptOut
    fk_name = "recipient"
    verbose_name = "opt-out"
    verbose_name_plural = "opt-out history"
    fields = ("action", "scope", "source", "at_display", "details_json")
    readonly_fields = fields
    ordering = ("-at", "-id")
    extra = 0
    max_num = 0
    can_delete = False
    at_display = timestamp_column("at", "at")

    @admin.display(description="details")
    def details_json(self, obj: OptOut) -> SafeString | str:
        if not obj.details:
            return "-"
        return format_html(
            "<details><summary>{}</summary>{}</details>",
            ", ".join(sorted(obj.details)),
            pretty_json(obj.details),
        )


@admin.register(Recipient)
class RecipientAdmin(LargeTableAdminMixin, admin.ModelAdmin):
    form = RecipientForm
    list_display = ("id_display", "email_display", "phone_display", "timezone", "locale", "updated")
    list_display_links = ("id_display",)
    list_filter = (ListKeyFilter,)
    ordering = ("id",)
    search_fields = ("id",)
    search_help_text = (
        "Exact recipient id, email address (any case) or phone number (E.164, e.g. +15551234567)."
    )
    inlines = (MembershipInline, OptOutInline, *CHANNEL_DATA_INLINES)
    readonly_fields = (
        "id_display",
        "preferences_json",
        "properties_json",
        "recent_instances",
        "recent_deliveries",
        "recent_feed",
        "created",
        "updated",
    )
    actions = ("erase",)
    created = timestamp_column("created_at", "created")
    updated = timestamp_column("updated_at", "updated", sortable=True)

    def get_fieldsets(self, request: HttpRequest, obj: Recipient | None = None) -> list:
        contact: tuple[str, ...] = ("email", "phone", "timezone", "locale")
        if obj is None:
            return [(None, {"fields": ("id", *contact)})]
        return [
            # The id is the caller's own key: set once, shown with its hidden characters.
            (None, {"fields": ("id_display", *contact, "created", "updated")}),
            (
                "Preferences",
                {
                    "fields": ("preferences_json",),
                    "description": "The most specific explicit setting wins: workflow × "
                    "channel, workflow, category × channel, category, channel, else send. "
                    "Critical workflows ignore them. Set through the API (PUT/PATCH "
                    "/api/v1/recipients/{id}/preferences/) or an unsubscribe link.",
                },
            ),
            ("Properties", {"fields": ("properties_json",)}),
            ("Instances", {"fields": ("recent_instances",)}),
            ("Deliveries", {"fields": ("recent_deliveries",)}),
            ("In-app feed", {"fields": ("recent_feed",)}),
        ]

    def get_inlines(self, request: HttpRequest, obj: Recipient | None) -> list:
        return [i for i in self.inlines if obj is not None or i not in CHANNEL_DATA_INLINES]

    def get_readonly_fields(self, request: HttpRequest, obj: Recipient | None = None) -> tuple:
        # The id is the caller's own key: set once.
        return (*self.readonly_fields, "id") if obj is not None else self.readonly_fields

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        return recipient_search(queryset, search_term), False

    @admin.display(description="id", ordering="id")
    def id_display(self, obj: Recipient) -> SafeString:
        return visible_id(obj.pk)

    @admin.display(description="email", ordering="email")
    def email_display(self, obj: Recipient) -> SafeString:
        return visible_id(obj.email)

    @admin.display(description="phone", ordering="phone")
    def phone_display(self, obj: Recipient) -> SafeString:
        return visible_id(obj.phone)

    def has_delete_permission(self, request: HttpRequest, obj: Recipient | None = None) -> bool:
        # Deleting the row would leave the person's addresses in deliveries and step
        # logs: erasure (the "erase" action, DELETE /api/v1/recipients/{id}/) does it all.
        return False

    def has_erase_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("recipients.delete_recipient")

    @admin.action(
        description="Erase selected recipients (personal data everywhere; cannot be undone)",
        permissions=["erase"],
    )
    def erase(self, request: HttpRequest, queryset: QuerySet) -> None:
        recipients = list(queryset)
        log_admin_change(request, recipients, "Erased")
        for recipient in recipients:
            # The one erasure service, as DELETE /api/v1/recipients/{id}/ calls it.
            recipient_erase(recipient_id=recipient.pk, actor=request.user.get_username())
        self.message_user(request, f"Erased {len(recipients)} recipient(s).", messages.SUCCESS)

    @admin.display(description="preferences")
    def preferences_json(self, obj: Recipient) -> SafeString | str:
        return pretty_json(obj.preferences) if obj.preferences else "none set: everything is sent"

    @admin.display(description="properties")
    def properties_json(self, obj: Recipient) -> SafeString | str:
        return pretty_json(obj.properties) if obj.properties else "-"

    @admin.display(description="latest instances")
    def recent_instances(self, obj: Recipient) -> SafeString:
        # trigger_unique_recipient_workflow_key leads with the recipient.
        instances = (
            TriggerInstance.objects.filter(recipient=obj)
            .select_related("workflow")
            .only("id", "workflow__key", "idempotency_key", "status", "created_at")
            .order_by("-created_at")[:RECENT]
        )
        rows = [
            (
                instance_link(i.pk),
                i.workflow.key,
                visible_id(i.idempotency_key, limit=40),
                status_badge(i.status, i.get_status_display()),
                timestamp_column("created_at")(self, i),
            )
            for i in instances
        ]
        url = (
            reverse("admin:triggers_triggerinstance_changelist")
            + "?"
            + urlencode({"recipient": obj.pk})
        )
        return format_html(
            "{}{}",
            _table(("instance", "workflow", "key", "status", "created"), rows, "No instances."),
            _more_link(url, "All instances of this recipient"),
        )

    @admin.display(description="latest feed items")
    def recent_feed(self, obj: Recipient) -> SafeString:
        # feed_recipient_newest: the recipient's newest items.
        items = (
            FeedItem.objects.filter(recipient=obj)
            .select_related("workflow")
            .defer("data", "body")
            .order_by("-created_at", "-id")[:RECENT]
        )
        rows = [
            (
                item.title,
                feed_state(item),
                item.category or "-",
                item.workflow.key,
                timestamp_column("created_at")(self, item),
            )
            for item in items
        ]
        return format_html(
            "{}{}{}",
            feed_summary(obj.pk),
            _table(("title", "state", "category", "workflow", "created"), rows, "No feed items."),
            _more_link(recipient_feed_url(obj.pk), "All feed items of this recipient"),
        )

    @admin.display(description="latest deliveries")
    def recent_deliveries(self, obj: Recipient) -> SafeString:
        deliveries = (
            Delivery.objects.filter(instance__recipient=obj)
            .only("id", "instance_id", "node_id", "channel", "recipient", "status", "updated_at")
            .order_by("-id")[:RECENT]
        )
        rows = [
            (
                format_html(
                    '<a href="{}">#{}</a>',
                    reverse("admin:executions_delivery_change", args=[quote(d.pk)]),
                    d.pk,
                ),
                instance_link(d.instance_id),
                d.node_id,
                d.channel,
                d.recipient or "-",
                status_badge(d.status, d.get_status_display()),
                timestamp_column("updated_at")(self, d),
            )
            for d in deliveries
        ]
        links = [
            _more_link(
                reverse("admin:executions_delivery_changelist") + "?" + urlencode({"q": address}),
                f"All deliveries to {address}",
            )
            for address in (obj.email, obj.phone)
            if address
        ]
        return format_html(
            "{}{}",
            _table(
                ("delivery", "instance", "node", "channel", "to", "status", "updated"),
                rows,
                "No deliveries.",
            ),
            format_html_join("", "{}", ((link,) for link in links)),
        )


@admin.register(RecipientList)
class RecipientListAdmin(admin.ModelAdmin):
    list_display = ("key_display", "name", "member_count", "updated")
    list_display_links = ("key_display",)
    search_fields = ("key", "name")
    ordering = ("key",)
    readonly_fields = ("key_display", "member_count", "members", "created", "updated")
    created = timestamp_column("created_at", "created")
    updated = timestamp_column("updated_at", "updated", sortable=True)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Member counts in the page's one query, a correlated count per row shown
        # (list_membership_unique: index-only); the paginator's COUNT leaves it out.
        per_list = (
            ListMembership.objects.filter(list=OuterRef("pk"))
            .order_by()
            .values("list")
            .annotate(n=Count("*"))
            .values("n")
        )
        return (
            super().get_queryset(request).annotate(n_members=Coalesce(Subquery(per_list), Value(0)))
        )

    def get_fieldsets(self, request: HttpRequest, obj: RecipientList | None = None) -> list:
        if obj is None:
            return [(None, {"fields": ("key", "name")})]
        return [
            (None, {"fields": ("key_display", "name", "member_count", "created", "updated")}),
            ("Members", {"fields": ("members",)}),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: RecipientList | None = None) -> tuple:
        # The key is what triggers name ({list: key}): set once.
        return (*self.readonly_fields, "key") if obj is not None else self.readonly_fields

    @admin.display(description="key", ordering="key")
    def key_display(self, obj: RecipientList) -> SafeString:
        return visible_id(obj.key)

    @admin.display(description="members", ordering="n_members")
    def member_count(self, obj: RecipientList) -> int:
        count = getattr(obj, "n_members", None)
        return count if count is not None else obj.memberships.count()

    @admin.display(description="first members (by id)")
    def members(self, obj: RecipientList) -> SafeString:
        shown = (
            Recipient.objects.filter(memberships__list=obj)
            .only("id", "email", "phone")
            .order_by("id")[:MEMBERS_SHOWN]
        )
        rows = [
            (
                format_html("<code>{}</code>", recipient_link(r.pk)),
                r.email or "-",
                r.phone or "-",
            )
            for r in shown
        ]
        url = reverse("admin:recipients_recipient_changelist") + "?" + urlencode({"list": obj.key})
        return format_html(
            "{}{}",
            _table(("recipient", "email", "phone"), rows, "No members."),
            _more_link(url, f"All {self.member_count(obj)} member(s), paginated"),
        )
