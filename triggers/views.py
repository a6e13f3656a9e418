from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import Lookup, paginated_list, validated_body
from notifyflow.pagination import NewestFirst
from notifyflow.parsers import PartsCheckedJSONParser
from workflows.models import Workflow
from workflows.serializers import WorkflowOutputSerializer

from .models import TriggerInstance
from .serializers import (
    CancelByKeyInputSerializer,
    CancelInputSerializer,
    TriggerBulkInputSerializer,
    TriggerBulkOutputSerializer,
    TriggerCreateInputSerializer,
    TriggerListFilterSerializer,
    TriggerOutputSerializer,
)
from .services import (
    instance_cancel,
    instance_cancel_by_key,
    instance_retry_or_conflict,
    instance_run_now_or_conflict,
    trigger_create,
    trigger_create_bulk,
    workflow_pause,
    workflow_resume,
)


class TriggerListCreateView(GenericAPIView):
    serializer_class = TriggerOutputSerializer
    pagination_class = NewestFirst
    # Higher layers may add filters (executions: ?recipient=) by subclassing.
    filter_serializer: type[serializers.Serializer] = TriggerListFilterSerializer
    filter_lookups: dict[str, Lookup] = {
        "workflow": "workflow__key",
        "status": "status",
        "idempotency_key": "idempotency_key",
    }

    def get_queryset(self):
        return TriggerInstance.objects.select_related("workflow", "workflow_version")

    @extend_schema(
        request=TriggerCreateInputSerializer,
        responses={201: TriggerOutputSerializer, 200: TriggerOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, TriggerCreateInputSerializer)
        result = trigger_create(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            payload=body["payload"],
        )
        data = TriggerOutputSerializer(result.instance).data
        if result.created:
            return Response(data, status=status.HTTP_201_CREATED)
        return Response(data, status=status.HTTP_200_OK, headers={"Idempotent-Replayed": "true"})

    @extend_schema(
        parameters=[TriggerListFilterSerializer],
        responses=TriggerOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def list(self, request: Request) -> Response:
        return paginated_list(
            self, request, self.get_queryset(), self.filter_serializer, self.filter_lookups
        )


class TriggerBulkCreateView(GenericAPIView):
    """Create or replay up to 1,000 triggers in one request (SPEC §6): 200 with one
    result per item; 400 only for a malformed envelope or too many items."""

    serializer_class = TriggerBulkOutputSerializer
    # Values are checked per item (BulkItemsField), so one bad item rejects nothing else.
    parser_classes = [PartsCheckedJSONParser]
    required_scope = "trigger"

    @extend_schema(
        request=TriggerBulkInputSerializer,
        responses={200: TriggerBulkOutputSerializer},
        operation_id="v1_triggers_bulk_create",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(
            request, TriggerBulkInputSerializer, settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES
        )
        outcomes = trigger_create_bulk(items=body["items"])
        return Response(TriggerBulkOutputSerializer(outcomes).data)


class TriggerDetailView(GenericAPIView):
    serializer_class = TriggerOutputSerializer
    lookup_field = "id"

    def get_queryset(self):
        return TriggerInstance.objects.select_related("workflow", "workflow_version")

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH)])
    def get(self, request: Request, id: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)


def _actor(request: Request) -> str:
    """The audited actor of an API call: the API key's name."""
    return f"api:{getattr(request.user, 'name', request.user)}"


class TriggerCancelView(GenericAPIView):
    """Cancel one instance (SPEC §8): 200 with the instance, 409 already_finished."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=CancelInputSerializer, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        body = validated_body(request, CancelInputSerializer)
        instance = instance_cancel(instance_id=id, actor=_actor(request), reason=body["reason"])
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRetryView(GenericAPIView):
    """Retry a failed instance (SPEC §9), as the admin's retry: 200 with the instance,
    404 unknown, 409 ``not_failed``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        instance = instance_retry_or_conflict(instance_id=id, actor=_actor(request))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRunNowView(GenericAPIView):
    """Skip the delay or backoff an enqueued instance waits on (SPEC §9), as the admin's
    run now: 200 with the instance, 404 unknown, 409 ``not_waiting``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        instance = instance_run_now_or_conflict(instance_id=id, actor=_actor(request))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerCancelByKeyView(GenericAPIView):
    """Cancel the instance of (workflow, idempotency_key), as Knock and Novu do by key."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(
        request=CancelByKeyInputSerializer,
        responses={200: TriggerOutputSerializer},
        operation_id="v1_triggers_cancel_by_key",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, CancelByKeyInputSerializer)
        instance = instance_cancel_by_key(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            actor=_actor(request),
            reason=body["reason"],
        )
        return Response(TriggerOutputSerializer(instance).data)


class WorkflowPauseView(GenericAPIView):
    """Pause (no step starts) or resume (due instances dispatched at once) a workflow."""

    serializer_class = WorkflowOutputSerializer
    queryset = Workflow.objects.select_related("current_version")
    lookup_field = "key"
    pause = True

    @extend_schema(request=None, responses={200: WorkflowOutputSerializer})
    def post(self, request: Request, key: str) -> Response:
        workflow = self.get_object()
        if self.pause:
            workflow_pause(workflow=workflow, actor=_actor(request))
        else:
            workflow_resume(workflow=workflow, actor=_actor(request))
        return Response(self.get_serializer(workflow).data)
