from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers as drf_serializers
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import json_object_body
from notifyflow.api_errors import ApiError

from .definition import DefinitionError
from .models import Workflow
from .serializers import WorkflowInputSerializer, WorkflowOutputSerializer
from .services import workflow_save


def _definition_error(exc: DefinitionError) -> drf_serializers.ValidationError:
    return drf_serializers.ValidationError(
        {f"definition.{p.field}" if p.field != "definition" else "definition":
         [drf_serializers.ErrorDetail(str(p), code=p.code)] for p in exc.errors}
    )


def _save(request: Request, workflow: Workflow | None) -> Workflow:
    serializer = WorkflowInputSerializer(data=json_object_body(request))
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    if workflow is not None and data["key"] != workflow.key:
        raise ApiError(code="key_mismatch", field="key",
                       message="key: must match the workflow key in the URL")
    if workflow is None and Workflow.objects.filter(key=data["key"]).exists():
        raise ApiError(code="duplicate_key", field="key",
                       message=f"key: a workflow with key {data['key']!r} exists; use PUT")
    try:
        return workflow_save(key=data["key"], name=data["name"], is_active=data["is_active"],
                             definition=data["definition"], workflow=workflow,
                             actor=str(request.user))
    except DefinitionError as exc:
        raise _definition_error(exc) from exc


class WorkflowListCreateView(GenericAPIView):
    serializer_class = WorkflowOutputSerializer
    pagination_class = LimitOffsetPagination
    queryset = Workflow.objects.select_related("current_version").order_by("key")

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
