from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import validated_body
from notifyflow.errors import ApplicationError
from notifyflow.pagination import WorkflowPages

from .models import Workflow
from .serializers import WorkflowInputSerializer, WorkflowOutputSerializer
from .services import workflow_save


def _save(request: Request, workflow: Workflow | None) -> Workflow:
    data = validated_body(request, WorkflowInputSerializer)
    if workflow is not None and data["key"] != workflow.key:
        raise ApplicationError(
            code="key_mismatch", field="key", message="key: must match the workflow key in the URL"
        )
    return workflow_save(
        key=data["key"],
        name=data["name"],
        is_active=data["is_active"],
        definition=data["definition"],
        workflow=workflow,
        create_only=workflow is None,
        actor=str(request.user),
    )


class WorkflowListCreateView(GenericAPIView):
    serializer_class = WorkflowOutputSerializer
    pagination_class = WorkflowPages
    queryset = Workflow.objects.select_related("current_version").order_by("key")

    @extend_schema(responses=WorkflowOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=WorkflowInputSerializer, responses={201: WorkflowOutputSerializer})
    def post(self, request: Request) -> Response:
        workflow = _save(request, None)
        return Response(self.get_serializer(workflow).data, status=status.HTTP_201_CREATED)


class WorkflowDetailView(GenericAPIView):
    serializer_class = WorkflowOutputSerializer
    queryset = Workflow.objects.select_related("current_version")
    lookup_field = "key"

    def get(self, request: Request, key: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=WorkflowInputSerializer)
    def put(self, request: Request, key: str) -> Response:
        workflow = _save(request, self.get_object())
        return Response(self.get_serializer(workflow).data)
