"""The history shown on a trigger instance's page: its step logs, inbox events and
status changes (read-only, oldest first)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Case, CharField, F, Q, QuerySet, Value, When, Window
from django.db.models.fields.json import KT
from django.db.models.functions import RowNumber
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from executions.history import STEP_LOG
from executions.models import StepExecutionLog
from executions.selectors import instance_status_history
from triggers.models import TriggerInstance, TriggerStatus
from triggers.models.inbox import InboxEvent

from ..support import (
    ReadOnlyAdminMixin,
    precise_time,
    pretty_json,
    status_badge,
    timestamp_column,
    truncated,
)
from ..visible import visible_id


def run_label(obj: StepExecutionLog) -> str:
    """The run of this node counted across operator retries (``attempt`` restarts at 1
    after a retry: it is the retry budget of the current run), e.g. ``3 (retry budget 1)``
    when they differ. A parking row (a wait, a delay at the end) is no attempt: the row
    that resolves it is the node's run."""
    if obj.parked:
        return "parked (not an attempt)"
    run = getattr(obj, "run_number", None) or obj.attempt
    return str(run) if run == obj.attempt else f"{run} (retry budget {obj.attempt})"


def skip_rule() -> Case:
    """The preference rule a skipped step's output names (``output.rule``), read in the
    query, so a list that defers the output still shows it; NULL for any other step."""
    return Case(
        When(~Q(skip_reason=""), then=KT("output__rule")),
        default=Value(None),
        output_field=CharField(),
    )


def skip_text(reason: str, rule: str | None) -> str:
    """``preference_opt_out, rule categories.marketing``; the reason alone without a rule."""
    return f"{reason}, rule {rule}" if rule else reason


def _rule_of(obj: StepExecutionLog) -> str | None:
    """The rule of a skipped step: annotated (``skip_rule``), or from its loaded output."""
    rule = getattr(obj, "skip_rule", None)
    if rule is None and "output" not in obj.get_deferred_fields():
        rule = obj.output.get("rule") if isinstance(obj.output, dict) else None
    return str(rule) if rule else None


def step_outcome(obj: StepExecutionLog) -> SafeString:
    """succeeded / failed, or "skipped" with its reason (a skip is a success
    that sent nothing) and, for a preference opt-out, the rule that decided: in the
    column itself, without opening the output."""
    if obj.skip_reason:
        rule = _rule_of(obj)
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


def step_locale(obj: StepExecutionLog) -> SafeString | str:
    """The locale the step's templates used ``t`` in and a push device's own locales that
    lacked keys (``translation_missing_by_locale``), each with how many keys it lacked
    (named in the title); "-" for a step that used no ``t``."""
    output = obj.output if isinstance(obj.output, dict) else {}
    missing: dict[str, list[Any]] = {}
    if output.get("locale"):
        missing[str(output["locale"])] = list(output.get("translation_missing") or [])
    others = output.get("translation_missing_by_locale")
    if isinstance(others, dict):
        missing.update({str(locale): list(keys) for locale, keys in others.items()})
    if not missing:
        return "-"
    return format_html_join(", ", "{}", ((_locale_label(*item),) for item in missing.items()))


def _locale_label(locale: str, keys: list[Any]) -> SafeString:
    if not keys:
        return format_html("<code>{}</code>", locale)
    return format_html(
        '<code>{}</code> <span class="nf-translation-missing" title="{}">{} missing</span>',
        locale,
        ", ".join(map(str, keys)),
        len(keys),
    )


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
        "locale",
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

    @admin.display(description="locale")
    def locale(self, obj: StepExecutionLog) -> SafeString | str:
        return step_locale(obj)

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
    fields = ("name", "event_id_display", "received", "state", "consumed_by_node")
    readonly_fields = fields
    ordering = ("received_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    received = timestamp_column("received_at", "received")

    @admin.display(description="event id")
    def event_id_display(self, obj: InboxEvent) -> SafeString:
        return visible_id(obj.event_id)

    @admin.display(description="state")
    def state(self, obj: InboxEvent) -> str:
        if obj.consumed_at is None:
            return "pending"
        return f"consumed {obj.consumed_at.isoformat(timespec='seconds')}"


def status_history_rows(obj: TriggerInstance) -> list[dict[str, Any]]:
    """The instance's status history for its page: every change, oldest first - the
    audit rows merged with the claims and routine releases its step logs record
    (``executions.selectors.instance_status_history``). A change that ends a
    step which skipped (sent nothing) says so, with the reason and rule."""
    skips = _skips_by_node(obj)
    return [
        {
            "from_status": change.from_status or "-",
            "to_status": change.to_status,
            "reason": _with_skip(change.reason, change.from_status, change.at, skips),
            "actor": change.actor,
            "when": precise_time(change.at),
            "details": _details(change.details),
            "from_step_log": change.source == STEP_LOG,
        }
        for change in instance_status_history(instance=obj)
    ]


# The reason of the change that ends a step: "node <id> done; next <id>" (a routine
# release) or "node <id> done; end of workflow" (executions.recording.advance).
_STEP_DONE = re.compile(r"^node ([A-Za-z0-9_-]+) done\b")


def _skips_by_node(obj: TriggerInstance) -> dict[str, list[tuple[datetime, str]]]:
    """node id -> (finished at, skip text, "" when it sent) of each step that ended the
    node, oldest first (steplog_trigger_started)."""
    found: dict[str, list[tuple[datetime, str]]] = {}
    for node_id, finished_at, reason, rule in (
        StepExecutionLog.objects.filter(trigger=obj, success=True, parked=False)
        .order_by("started_at", "id")
        .values_list("node_id", "finished_at", "skip_reason", skip_rule())
    ):
        text = skip_text(reason, rule) if reason else ""
        found.setdefault(node_id, []).append((finished_at, text))
    return found


def _with_skip(
    reason: str, from_status: str, at: datetime, skips: dict[str, list[tuple[datetime, str]]]
) -> SafeString | str:
    """``reason``, and when it ends a step that skipped: "(skipped: <reason, rule>)"."""
    match = _STEP_DONE.match(reason)
    if from_status != TriggerStatus.PROCESSING or match is None:
        return reason
    ended = [text for finished_at, text in skips.get(match.group(1), []) if finished_at <= at]
    if not ended or not ended[-1]:
        return reason
    return format_html(
        '{} <span class="nf-skip-note">(skipped: <code class="nf-skip-reason">{}</code>)</span>',
        reason,
        ended[-1],
    )


def _details(details: dict[str, Any] | None) -> SafeString | str:
    if not details:
        return "-"
    return format_html(
        "<details><summary>{}</summary>{}</details>",
        ", ".join(sorted(details)),
        pretty_json(details),
    )
