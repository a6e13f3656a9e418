"""The trigger instance's page: what it waits for, its graph with each node's latest
outcome, payload and vars (secrets redacted), and which operator buttons it offers."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin
from django.db.models import Field
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from executions.models import StepExecutionLog
from notifyflow.ids import short_id
from notifyflow.redaction import redact
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus

from ..drawing import draw_workflow_svg
from ..support import can_operate, precise_time, pretty_json, recipient_link, waiting_until
from ..visible import visible_id
from .columns import failure_kind, is_waiting
from .inlines import skip_rule, skip_text, status_history_rows

# Not granted to the operators group: triggers/migrations/0008 creates it, an
# administrator hands it out.
EDIT_PAYLOAD_PERMISSION = "triggers.edit_payload_triggerinstance"


def delay_description(obj: TriggerInstance) -> SafeString | str:
    """The delay node whose step put the instance to sleep, with its rule (the latest
    delay step of the instance: steplog_trigger_started)."""
    step = (
        StepExecutionLog.objects.filter(trigger=obj, node_type="delay", success=True)
        .order_by("-started_at", "-id")
        .only("node_id", "output")
        .first()
    )
    if step is None:
        return "a delay"
    rule = step.output.get("rule") if isinstance(step.output, dict) else None
    if rule:
        return format_html("delay node <code>{}</code> ({})", step.node_id, rule)
    return format_html("delay node <code>{}</code>", step.node_id)


def node_states(obj: TriggerInstance) -> dict[str, tuple[str, str]]:
    """node id -> ("succeeded" / "skipped" / "failed", what to say of that latest
    attempt: the error of a failed one, why a skipped one sent nothing)."""
    states: dict[str, tuple[str, str]] = {}
    # Oldest first, so each node ends with the outcome of its latest attempt.
    for node_id, success, error, skip_reason, rule in (
        StepExecutionLog.objects.filter(trigger=obj)
        .order_by("started_at", "id")
        .values_list("node_id", "success", "error", "skip_reason", skip_rule())
    ):
        if not success:
            states[node_id] = ("failed", error)
        elif skip_reason:
            states[node_id] = ("skipped", skip_text(skip_reason, rule))
        else:
            states[node_id] = ("succeeded", "")
    return states


def operator_buttons(request: HttpRequest, obj: TriggerInstance) -> dict[str, Any]:
    """The change form's context for the operator buttons (change_form.html)."""
    failed = obj.status == TriggerStatus.FAILED
    context: dict[str, Any] = {
        "nf_can_retry": failed,
        # A permanent failure fails again on a plain retry: the button goes to a page
        # that says so first.
        "nf_retry_needs_confirmation": failed and failure_kind(obj) == "permanent",
        "nf_can_edit_payload": failed and request.user.has_perm(EDIT_PAYLOAD_PERMISSION),
        "nf_can_run_now": is_waiting(obj),
        "nf_can_cancel": not obj.is_terminal,
    }
    if failed and obj.workflow.current_version_id not in (None, obj.workflow_version_id):
        latest = obj.workflow.current_version
        if latest is not None:
            context["nf_latest_version"] = latest.version
    return context


# What a gate-parked instance waits on, in the "waiting for" line.
GATE_TEXT: dict[str, str] = {
    ParkedOn.BATCH: "its batch to close",
    ParkedOn.THROTTLE: "room in its throttle",
    ParkedOn.SEND_WINDOW: "its send window (or the recipient's quiet hours) to open",
}


class InstanceDetailMixin(admin.ModelAdmin):
    """The change page's read-only fields and context."""

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> TriggerInstance | None:
        queryset = self.get_queryset(request).select_related("workflow", "workflow_version")
        field = cast(Field, self.opts.pk if from_field is None else self.opts.get_field(from_field))
        try:
            return queryset.get(**{field.name: field.to_python(object_id)})
        except (TriggerInstance.DoesNotExist, ValueError, forms.ValidationError):
            return None

    @admin.display(description="waiting for")
    def waiting_display(self, obj: TriggerInstance) -> SafeString | str:
        """What an enqueued instance waits for - an event (wait node), a retry's backoff
        or a delay - and until when; "-" for one that is running or finished."""
        if obj.status != TriggerStatus.ENQUEUED:
            return "-"
        node = obj.current_node_id
        if obj.waiting_for_event:
            deadline = obj.wait_deadline or obj.available_at
            return format_html(
                "event <code>{}</code> at node <code>{}</code>, {} (then it times out and "
                "continues)",
                obj.waiting_for_event,
                node or "-",
                waiting_until(deadline) or f"deadline {precise_time(deadline)} passed",
            )
        if obj.parked_on in GATE_TEXT:
            deadline = obj.wait_deadline or obj.available_at
            return format_html(
                "{} at node <code>{}</code>, {} (Run now lets it through)",
                GATE_TEXT[obj.parked_on],
                node or "-",
                waiting_until(deadline) or f"due since {precise_time(deadline)}",
            )
        until = waiting_until(obj.available_at)
        if until is None:
            if obj.workflow.is_paused:
                return "nothing: due now, but the workflow is paused (it runs on resume)"
            return "nothing: due now (a worker picks it up)"
        if obj.attempts and obj.last_error:
            # Inline, not truncated(): its two-line clamp breaks the sentence apart.
            error = obj.last_error.removeprefix(f"node {node}: ")
            return format_html(
                'retry backoff: attempt {} of node <code>{}</code> failed (<span title="{}">{}'
                "</span>); next attempt {}",
                obj.attempts,
                node or "-",
                obj.last_error,
                error if len(error) <= 120 else error[:119] + "…",
                until,
            )
        then = (
            format_html("then node <code>{}</code> runs", node)
            if node
            else "then the workflow completes"
        )
        return format_html("{}, {}; {}", delay_description(obj), until, then)

    @admin.display(description="recipient")
    def recipient_display(self, obj: TriggerInstance) -> SafeString | str:
        """The person the instance notifies (a link to their page), "erased" after an
        erasure, "-" for a payload-only instance."""
        if obj.recipient_id is not None:
            return recipient_link(obj.recipient_id)
        if obj.recipient_erased:
            return "[erased] (the recipient was erased; their addresses were removed)"
        return "- (payload only: addresses come from the payload)"

    @admin.display(description="idempotency key")
    def idempotency_key_display(self, obj: TriggerInstance) -> SafeString:
        return visible_id(obj.idempotency_key)

    @admin.display(description="workflow version")
    def version_display(self, obj: TriggerInstance) -> str:
        return f"v{obj.workflow_version.version}"

    @admin.display(description="graph")
    def drawing(self, obj: TriggerInstance) -> SafeString:
        states = node_states(obj)
        return draw_workflow_svg(
            obj.workflow_version.definition,
            current_node=obj.current_node_id,
            node_states={node: state for node, (state, _) in states.items()},
            node_errors={node: note for node, (state, note) in states.items() if state == "failed"},
            node_skips={node: note for node, (state, note) in states.items() if state == "skipped"},
            waiting_until=(
                timezone.localtime(obj.available_at).strftime("%Y-%m-%d %H:%M %Z")
                if is_waiting(obj)
                else None
            ),
        )

    @admin.display(description="payload")
    def payload_json(self, obj: TriggerInstance) -> SafeString:
        return pretty_json(redact(obj.payload))

    @admin.display(description="vars")
    def vars_json(self, obj: TriggerInstance) -> SafeString:
        return pretty_json(obj.vars)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: TriggerInstance | None = None,
    ) -> HttpResponse:
        if obj is not None and can_operate(request):
            context.update(operator_buttons(request, obj))
        context["nf_status_history"] = status_history_rows(obj) if obj is not None else None
        if obj is not None:
            # Its name is its key: shown as the key is (change_form.html), not str(obj),
            # where the key's trailing space would run into the separator.
            context["nf_object_name"] = format_html(
                "{} ({})", visible_id(obj.idempotency_key), short_id(obj.pk)
            )
        context["nf_step_logs_url"] = (
            reverse("admin:executions_stepexecutionlog_changelist")
            + f"?trigger__id__exact={obj.pk}"
            if obj is not None
            else ""
        )
        return super().render_change_form(
            request, context, add=add, change=change, form_url=form_url, obj=obj
        )
