"""Workflow triggers: bindings of an event name to a workflow, and the idempotency key
a binding would make; the logic is in ``triggers.events``."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, paginated_list, validated_body
from api.pagination import ByIdOldestFirst
from api_keys.authentication import request_key
from triggers.events import (
    idempotency_key_preview,
    workflow_trigger_delete,
    workflow_trigger_save,
)
from triggers.models.events import WorkflowTrigger

from ..permissions import require_workflow, visible_workflows
from ..serializers.workflow_triggers import (
    PreviewKeyInputSerializer,
    PreviewKeyOutputSerializer,
    WorkflowTriggerFilterSerializer,
    WorkflowTriggerInputSerializer,
    WorkflowTriggerOutputSerializer,
)


def _save_kwargs(request: Request) -> dict:
    body = validated_body(request, WorkflowTriggerInputSerializer)
    require_workflow(request_key(request), body["workflow"])
    return {
        "event_name": body["event_name"],
        "workflow": body["workflow"],
        "is_active": body["is_active"],
        "idempotency_setting": body.get("idempotency_setting"),
    }


class WorkflowTriggerListCreateView(ApiView):
    serializer_class = WorkflowTriggerOutputSerializer
    pagination_class = ByIdOldestFirst
    query_serializer_class = WorkflowTriggerFilterSerializer

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            request_key(self.request),
            field="workflow__key",
        )

    @extend_schema(
        parameters=[WorkflowTriggerFilterSerializer],
        responses=WorkflowTriggerOutputSerializer(many=True),
        operation_id="v1_workflow_triggers_list",
    )
    def get(self, request: Request) -> Response:
        return paginated_list(
            self,
            self.get_queryset(),
            {"event_name": "event_name", "workflow": "workflow__key"},
        )

    @extend_schema(
        request=WorkflowTriggerInputSerializer, responses={201: WorkflowTriggerOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        binding = workflow_trigger_save(**_save_kwargs(request))
        return Response(self.get_serializer(binding).data, status=status.HTTP_201_CREATED)


class WorkflowTriggerDetailView(ApiView):
    serializer_class = WorkflowTriggerOutputSerializer
    lookup_field = "id"

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            request_key(self.request),
            field="workflow__key",
        )

    def get(self, request: Request, id: int) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=WorkflowTriggerInputSerializer)
    def put(self, request: Request, id: int) -> Response:
        binding = self.get_object()
        binding = workflow_trigger_save(binding=binding, **_save_kwargs(request))
        return Response(self.get_serializer(binding).data)

    def delete(self, request: Request, id: int) -> Response:
        workflow_trigger_delete(binding=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkflowTriggerPreviewKeyView(ApiView):
    serializer_class = PreviewKeyOutputSerializer
    lookup_field = "id"
    # Writes nothing: a read.
    required_scope = {"POST": "read"}

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            request_key(self.request),
            field="workflow__key",
        )

    @extend_schema(request=PreviewKeyInputSerializer, responses={200: PreviewKeyOutputSerializer})
    def post(self, request: Request, id: int) -> Response:
        binding = self.get_object()
        body = validated_body(request, PreviewKeyInputSerializer)
        preview = idempotency_key_preview(
            binding=binding, context=body["context"], event_id=body["event_id"], at=body["at"]
        )
        return Response(
            {
                "idempotency_key": preview.idempotency_key,
                "strategy": preview.strategy,
                "random": preview.random,
                "note": preview.note,
            }
        )
