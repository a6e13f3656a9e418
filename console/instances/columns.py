"""The trigger-instance list: its filters, exact-match search and columns.

The table grows without bound, so every filter and search here is an index lookup (each
names its index) and the error kind is a correlated subquery evaluated for the page's
rows only.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from executions.models import StepExecutionLog, instance_ids_sent_to, looks_like_recipient
from notifyflow import ids
from triggers.models import TriggerInstance, TriggerStatus

from ..support import InputListFilter, parse_uuid, status_badge, truncated, waiting_until
from ..visible import visible_id


def is_waiting(obj: TriggerInstance) -> bool:
    """Enqueued but not due: a delay, a retry's backoff or a wait."""
    return obj.status == TriggerStatus.ENQUEUED and obj.available_at > timezone.now()


def failure_kind(obj: TriggerInstance) -> str:
    """ "permanent" or "transient" for the latest failed step of ``obj``, "" when unknown
    (annotated by the admin's get_queryset, which get_object uses too)."""
    return getattr(obj, "last_error_kind", "") or ""


def last_failure_kind() -> Coalesce:
    """error_kind of the instance's latest failed step (steplog_trigger_started)."""
    latest = Subquery(
        StepExecutionLog.objects.filter(trigger=OuterRef("pk"), success=False)
        .order_by("-started_at", "-id")
        .values("error_kind")[:1]
    )
    # Never NULL, so exclude() on it keeps instances that have no failed step.
    return Coalesce(latest, Value(""))


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


class RecipientFilter(InputListFilter):
    """Instances of one recipient, by exact id (trigger_unique_recipient_workflow_key
    leads with the recipient); the recipient's console page links here."""

    title = "recipient (id)"
    parameter_name = "recipient"
    field_path = "recipient_id"


class InstanceErrorKindFilter(admin.SimpleListFilter):
    """Failed instances by the kind of their last failure: a permanent one (render
    error, rejected recipient) fails again on a plain retry."""

    title = "error kind"
    parameter_name = "error_kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("permanent", "permanent"), ("transient", "transient")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if not self.value():
            return queryset
        kind = "permanent" if self.value() == "permanent" else "transient"
        kinds = ["permanent"] if kind == "permanent" else ["transient", "lease_expired"]
        return queryset.filter(status=TriggerStatus.FAILED).filter(last_error_kind__in=kinds)


class InstanceListMixin(admin.ModelAdmin):
    """Search and the list's columns."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # A correlated subquery: evaluated for the page's rows (and, when the filter is
        # used, for failed rows only).
        return super().get_queryset(request).annotate(last_error_kind=last_failure_kind())

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Exact matches only, each served by an index (the primary key,
        trigger_idempotency_key, trigger_unique_recipient_workflow_key,
        delivery_recipient); a LIKE '%term%' over a million rows is a full scan."""
        term = search_term.strip()
        if not term:
            return queryset, False
        # trigger_unique_recipient_workflow_key leads with the recipient.
        condition = Q(idempotency_key=term) | Q(recipient_id=term)
        as_uuid = parse_uuid(term)
        if as_uuid is not None:
            condition |= Q(pk=as_uuid)
        found = queryset.filter(condition)
        if not looks_like_recipient(search_term):
            return found, False
        # The ids first (delivery_recipient index), then OR'd with the id/key match:
        # both sides are index lookups.
        sent_to = instance_ids_sent_to(search_term)
        return found | queryset.filter(pk__in=sent_to), False

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
    def idempotency_key_short(self, obj: TriggerInstance) -> SafeString:
        return visible_id(obj.idempotency_key, limit=28)

    @admin.display(description="status")
    def status_display(self, obj: TriggerInstance) -> SafeString:
        if is_waiting(obj):
            badge = status_badge("waiting", "Waiting")
        else:
            badge = status_badge(obj.status, obj.get_status_display())
        if obj.is_test:  # a test send (console or API): left out of the stats
            return format_html("{} {}", badge, status_badge("test", "TEST"))
        return badge

    @admin.display(description="due")
    def due(self, obj: TriggerInstance) -> SafeString | str:
        """ "waiting until …" (absolute, with zone, and relative) for a delayed, backing-off
        or waiting instance; "due now" for one a worker should pick up; else "-"."""
        if obj.status != TriggerStatus.ENQUEUED:
            return "-"
        return waiting_until(obj.available_at) or "due now"

    @admin.display(description="kind")
    def error_kind_display(self, obj: TriggerInstance) -> SafeString | str:
        """permanent (a plain retry fails again) or transient, for a failed instance."""
        kind = failure_kind(obj)
        if obj.status != TriggerStatus.FAILED or not kind:
            return "-"
        colour = "#c62828" if kind == "permanent" else "#b35c00"
        return format_html(
            '<span class="nf-error-kind nf-error-kind-{}" style="color:{};font-weight:600">'
            "{}</span>",
            kind,
            colour,
            kind,
        )

    @admin.display(description="last error")
    def last_error_short(self, obj: TriggerInstance) -> SafeString | str:
        # "node text: ..." - the node is the column beside it; the full text on hover.
        prefix = f"node {obj.current_node_id}: "
        text = obj.last_error
        short = text[len(prefix) :] if text.startswith(prefix) else text
        return truncated(short, 90, full=text)
