from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import ApiView, limit_to_workflows, paginated_list, validated_body
from notifyflow.pagination import ByIdOldestFirst, StepLogsOldestFirst
from triggers.permissions import require_visible_instance, visible_instances
from triggers.serializers import TriggerListFilterSerializer, TriggerOutputSerializer
from triggers.views import TriggerListCreateView
from workflows.models import Workflow

from . import tracking
from .models import Delivery, StepExecutionLog, instance_ids_sent_to
from .preview import workflow_preview
from .selectors import instance_timeline, workflow_stats
from .serializers import (
    DeliveryOutputSerializer,
    PreviewInputSerializer,
    PreviewOutputSerializer,
    StepLogFilterSerializer,
    StepLogOutputSerializer,
    TimelineOutputSerializer,
    WorkflowStatsOutputSerializer,
)


class TriggerListByRecipientFilterSerializer(TriggerListFilterSerializer):
    recipient = serializers.CharField(
        required=False,
        max_length=320,
        help_text="An email address or phone number a delivery of the instance was sent to",
    )


def _sent_to(queryset: QuerySet, recipient: str) -> QuerySet:
    # The ids first (delivery_recipient index), then the instances by primary key: a
    # join or IN-subquery lets the planner walk instances by created_at instead.
    return queryset.filter(pk__in=instance_ids_sent_to(recipient))


# GET/POST /api/v1/triggers/ with ?recipient= added: deliveries belong to this layer,
# so the filter is added here and notifyflow/urls.py points at this view. (A comment,
# not a docstring: drf-spectacular would publish a docstring as the API description.)
class TriggerListView(TriggerListCreateView):
    query_serializer_class = TriggerListByRecipientFilterSerializer
    filter_lookups = {**TriggerListCreateView.filter_lookups, "recipient": _sent_to}

    @extend_schema(
        parameters=[TriggerListByRecipientFilterSerializer],
        responses=TriggerOutputSerializer(many=True),
        description="Trigger instances, newest first; `recipient` finds those with a "
        "delivery to an email address or phone number.",
    )
    def get(self, request: Request) -> Response:
        return self.list(request)


def _require_visible_workflow(request: Request, key: str) -> None:
    """404 unless the caller's key may use the workflow (the services answer 404 for an
    unknown one: no query here for a key without a workflow list)."""
    if getattr(request.user, "workflows", None):
        get_object_or_404(limit_to_workflows(request, Workflow.objects.only("id")), key=key)


class TriggerStepsView(ApiView):
    """Step logs of one trigger instance, oldest first."""

    serializer_class = StepLogOutputSerializer
    pagination_class = StepLogsOldestFirst
    required_scope = {"GET": "read_own"}

    @extend_schema(responses=StepLogOutputSerializer(many=True))
    def get(self, request: Request, id: str) -> Response:
        require_visible_instance(request.user, id)
        queryset = StepExecutionLog.objects.filter(trigger_id=id).select_related("workflow")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class StepLogListView(ApiView):
    serializer_class = StepLogOutputSerializer
    pagination_class = StepLogsOldestFirst
    query_serializer_class = StepLogFilterSerializer

    @extend_schema(
        parameters=[StepLogFilterSerializer], responses=StepLogOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return paginated_list(
            self,
            visible_instances(
                StepExecutionLog.objects.select_related("workflow"),
                request.user,
                prefix="trigger__",
            ),
            {"trigger": "trigger_id", "node": "node_id"},
        )


class TriggerTimelineView(ApiView):
    """Where an instance is, what happened and what it waits for: its status
    history (creation included), step logs, inbox and pending work; 404 unknown."""

    serializer_class = TimelineOutputSerializer
    required_scope = {"GET": "read_own"}

    def get(self, request: Request, id: str) -> Response:
        require_visible_instance(request.user, id, only_if_restricted=True)
        return Response(self.get_serializer(instance_timeline(instance_id=id)).data)


class WorkflowStatsView(ApiView):
    """Instances per status and per-node executions, successes and failures over all
    versions; 404 unknown workflow."""

    serializer_class = WorkflowStatsOutputSerializer

    def get(self, request: Request, key: str) -> Response:
        _require_visible_workflow(request, key)
        return Response(self.get_serializer(workflow_stats(key=key)).data)


class TriggerDeliveriesView(ApiView):
    """Deliveries of one trigger instance (one per sending node), oldest first, each
    with its provider attempts and status events."""

    serializer_class = DeliveryOutputSerializer
    pagination_class = ByIdOldestFirst
    required_scope = {"GET": "read_own"}

    @extend_schema(responses=DeliveryOutputSerializer(many=True))
    def get(self, request: Request, id: str) -> Response:
        require_visible_instance(request.user, id)
        queryset = Delivery.objects.filter(instance_id=id).prefetch_related(
            "attempt_rows", "events"
        )
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


def _twilio_auth_tokens() -> list[str]:
    """Every auth token a message could have been sent with (failover accounts too)."""
    tokens = [settings.TWILIO_AUTH_TOKEN]
    for entry in settings.NOTIFYFLOW_SMS_BACKENDS:
        if isinstance(entry, dict):
            tokens.append((entry.get("options") or {}).get("auth_token", ""))
    return [t for t in tokens if t]


@csrf_exempt
@require_POST
def twilio_status_callback(request: HttpRequest) -> HttpResponse:
    """Twilio's message status callback. 403 unless X-Twilio-Signature is valid for one
    of our auth tokens (twilio.request_validator), over the URL Twilio was given
    (NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL, else this request's own URL)."""
    from twilio.request_validator import RequestValidator

    signature = request.headers.get("X-Twilio-Signature", "")
    url = settings.NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL or request.build_absolute_uri()
    params = request.POST.dict()
    if not signature or not any(
        RequestValidator(token).validate(url, params, signature) for token in _twilio_auth_tokens()
    ):
        return HttpResponseForbidden("invalid Twilio signature")
    twilio_status = params.get("MessageStatus", "")
    tracking.delivery_status_record(
        provider="twilio",
        message_id=params.get("MessageSid", ""),
        provider_event=twilio_status,
        status=tracking.TWILIO_STATUSES.get(twilio_status),
        raw=params,
        occurred_at=timezone.now(),
    )
    return HttpResponse(status=204)


class WorkflowPreviewView(ApiView):
    """What a payload would make the workflow do: the path and every node rendered.
    Nothing is sent and nothing is written."""

    serializer_class = PreviewOutputSerializer
    # Renders, sends nothing and writes nothing: a read.
    required_scope = {"POST": "read"}

    @extend_schema(request=PreviewInputSerializer, responses={200: PreviewOutputSerializer})
    def post(self, request: Request, key: str) -> Response:
        data = validated_body(request, PreviewInputSerializer)
        _require_visible_workflow(request, key)
        return Response(
            workflow_preview(key=key, payload=data["payload"], version=data.get("version"))
        )
