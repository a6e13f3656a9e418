"""Bulk actions on the trigger-instance list: retry, run now, cancel. Each calls the
same service as the API, per instance, with the operator as the audited actor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from notifyflow.errors import ApplicationError
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import instance_cancel, instance_retry, instance_run_now

from ..support import can_operate, log_admin_change

# An action over "all N matching" could name a million rows; each retry is a
# transaction plus a broker message, so one click handles at most this many.
ACTION_BATCH_LIMIT = 500

# Permanent failures listed on the bulk retry's confirmation page (the count says the rest).
PERMANENT_SHOWN = 20


def cancel_by_operator(*, instance_id: Any, actor: str) -> None:
    instance_cancel(instance_id=instance_id, actor=actor, reason="cancelled by operator")


class InstanceActionsMixin(admin.ModelAdmin):
    actions = ("retry_failed", "retry_failed_including_permanent", "run_now", "cancel")

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return can_operate(request)

    @admin.action(
        description="Retry selected failed instances (skips permanent failures)",
        permissions=["operate"],
    )
    def retry_failed(self, request: HttpRequest, queryset: QuerySet) -> None:
        permanent = queryset.filter(status=TriggerStatus.FAILED, last_error_kind="permanent")
        skipped = permanent.count()
        if queryset.exclude(pk__in=permanent.values("pk")).exists():
            self._retry(
                request,
                queryset.exclude(status=TriggerStatus.FAILED, last_error_kind="permanent"),
            )
        if skipped:
            self.message_user(
                request,
                f"{skipped} permanent failure(s) skipped: a plain retry fails again (same "
                "payload, same workflow version). Fix the workflow and use “Retry on latest "
                "version”, edit the payload, or use “Retry … including permanent failures”.",
                messages.WARNING,
            )

    @admin.action(
        description="Retry selected failed instances, including permanent failures",
        permissions=["operate"],
    )
    def retry_failed_including_permanent(
        self, request: HttpRequest, queryset: QuerySet
    ) -> HttpResponse | None:
        """Asks first when the selection holds permanent failures (a plain retry fails
        again): a page listing them, whose "yes" posts the action back with ``confirmed``."""
        permanent = queryset.filter(status=TriggerStatus.FAILED, last_error_kind="permanent")
        if not request.POST.get("confirmed") and permanent.exists():
            shown = list(
                permanent.order_by("-created_at").select_related("workflow", "workflow_version")[
                    :PERMANENT_SHOWN
                ]
            )
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Retry permanent failures?",
                "permanent": shown,
                "permanent_count": permanent.count(),
                "selected_ids": list(
                    queryset.order_by().values_list("pk", flat=True)[: ACTION_BATCH_LIMIT + 1]
                ),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/triggers/triggerinstance/retry_permanent_confirm.html", context
            )
        self._retry(request, queryset)
        return None

    @admin.action(description="Run selected delayed instances now", permissions=["operate"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(
            request,
            queryset,
            instance_run_now,
            verb="Made due now",
            skip_reason="not waiting for a later time, skipped",
            log_message="Run now (bulk action)",
        )

    @admin.action(description="Cancel selected unfinished instances", permissions=["operate"])
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(
            request,
            queryset,
            cancel_by_operator,
            verb="Cancelled",
            skip_reason="already finished, skipped",
            log_message="Cancelled (bulk action)",
        )

    def _retry(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._apply(
            request,
            queryset,
            instance_retry,
            verb="Retried",
            skip_reason="not failed, skipped",
            log_message="Retried (bulk action)",
        )

    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet,
        operation: Callable[..., object],
        *,
        verb: str,
        skip_reason: str,
        log_message: str,
    ) -> None:
        """``operation(instance_id=, actor=)`` -> done, or skipped where the service
        raises (it cannot act on that instance), for at most ACTION_BATCH_LIMIT of the
        selection; one LogEntry per instance done."""
        ids = list(queryset.order_by().values_list("pk", flat=True)[: ACTION_BATCH_LIMIT + 1])
        if len(ids) > ACTION_BATCH_LIMIT:
            ids = ids[:ACTION_BATCH_LIMIT]
            self.message_user(
                request,
                f"Only the first {ACTION_BATCH_LIMIT} selected "
                "instances were handled; run the action again for the rest.",
                messages.WARNING,
            )
        actor = request.user.get_username()

        def applied(pk: Any) -> bool:
            try:
                operation(instance_id=pk, actor=actor)
            except ApplicationError:
                return False
            return True

        done = [pk for pk in ids if applied(pk)]
        # object_repr needs the key; one query for the whole batch.
        log_admin_change(
            request,
            TriggerInstance.objects.filter(pk__in=done).only("pk", "idempotency_key"),
            log_message,
        )
        if done:
            self.message_user(request, f"{verb} {len(done)} instance(s).", messages.SUCCESS)
        if len(ids) - len(done):
            self.message_user(
                request, f"{len(ids) - len(done)} instance(s) {skip_reason}.", messages.WARNING
            )
