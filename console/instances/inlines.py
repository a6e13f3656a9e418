"""The history shown on a trigger instance's page: its step logs, inbox events and
status changes (read-only, oldest first)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from executions.history import STEP_LOG
from executions.models import StepExecutionLog
from executions.selectors import instance_status_history
from triggers.inbox_models import InboxEvent
from triggers.models import TriggerInstance

from ..support import (
    ReadOnlyAdminMixin,
    precise_time,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)


def run_label(obj: StepExecutionLog) -> str:
    """The run of this node counted across operator retries (``attempt`` restarts at 1
    after a retry: it is the retry budget of the current run), e.g. ``3 (retry budget 1)``
    when they differ. A parking row (a wait, a delay at the end) is no attempt: the row
    that resolves it is the node's run."""
    if obj.parked:
        return "parked (not an attempt)"
    run = getattr(obj, "run_number", None) or obj.attempt
    return str(run) if run == obj.attempt else f"{run} (retry budget {obj.attempt})"


def step_outcome(obj: StepExecutionLog) -> SafeString:
    """succeeded / failed, or "skipped" with its reason (SPEC §4: a skip is a success
    that sent nothing) and, for a preference opt-out, the rule that decided."""
    if obj.skip_reason:
        # Not on the step-log list, which defers the output (a query per row).
        output = None if "output" in obj.get_deferred_fields() else obj.output
        rule = output.get("rule") if isinstance(output, dict) else None
        return format_html(
            '{} <code class="nf-skip-reason" title="{}">{}</code>{}',
            status_badge("skipped", "skipped"),
            obj.get_skip_reason_display(),
            obj.skip_reason,
            format_html(' <span class="nf-rule">rule <code>{}</code></span>', rule) if rule else "",
        )
    if obj.success:
        return status_badge("completed", "succeeded")
    return status_badge("failed", "failed")


class StepLogInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StepExecutionLog
    fk_name = "trigger"
    verbose_name = "step log"
    verbose_name_plural = "step logs"
    fields = (
        "node_id",
        "node_type",
        "run",
        "started",
        "duration",
        "outcome",
        "error_kind",
        "error_short",
        "output_json",
    )
    readonly_fields = fields
    ordering = ("started_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The input context is a copy of payload + vars per step: not shown here.
        return (
            super()
            .get_queryset(request)
            .defer("input_context")
            .annotate(
                # Parking rows (a wait, a delay at the end) are numbered apart: they
                # are not attempts.
                run_number=Window(
                    RowNumber(),
                    partition_by=[F("node_id"), F("parked")],
                    order_by=[F("started_at"), F("id")],
                )
            )
        )

    @admin.display(description="attempt")
    def run(self, obj: StepExecutionLog) -> str:
        return run_label(obj)

    @admin.display(description="error")
    def error_short(self, obj: StepExecutionLog) -> SafeString | str:
        return truncated(obj.error, 90)

    @admin.display(description="outcome")
    def outcome(self, obj: StepExecutionLog) -> SafeString:
        return step_outcome(obj)

    started = timestamp_column("started_at", "started")

    @admin.display(description="duration")
    def duration(self, obj: StepExecutionLog) -> str:
        return f"{obj.duration_ms:.0f} ms"

    @admin.display(description="output")
    def output_json(self, obj: StepExecutionLog) -> SafeString | str:
        if not obj.output:
            return "-"
        return format_html(
            "<details><summary>{} keys</summary>{}</details>",
            len(obj.output),
            pretty_json(obj.output),
        )


class InboxInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Events delivered to the instance: pending ones wait for a wait node."""

    model = InboxEvent
    fk_name = "instance"
    verbose_name = "inbox event"
    verbose_name_plural = "inbox"
    fields = ("name", "event_id", "received", "state", "consumed_by_node")
    readonly_fields = fields
    ordering = ("received_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    received = timestamp_column("received_at", "received")

    @admin.display(description="state")
    def state(self, obj: InboxEvent) -> str:
        if obj.consumed_at is None:
            return "pending"
        return f"consumed {obj.consumed_at.isoformat(timespec='seconds')}"


def status_history_rows(obj: TriggerInstance) -> list[dict[str, Any]]:
    """The instance's status history for its page: every change, oldest first - the
    audit rows merged with the claims and routine releases its step logs record
    (SPEC §3, ``executions.selectors.instance_status_history``)."""
    return [
        {
            "from_status": change.from_status or "-",
            "to_status": change.to_status,
            "reason": change.reason,
            "actor": change.actor,
            "when": precise_time(change.at),
            "details": _details(change.details),
            "from_step_log": change.source == STEP_LOG,
        }
        for change in instance_status_history(instance=obj)
    ]


def _details(details: dict[str, Any] | None) -> SafeString | str:
    if not details:
        return "-"
    return format_html(
        "<details><summary>{}</summary>{}</details>",
        ", ".join(sorted(details)),
        pretty_json(details),
    )
