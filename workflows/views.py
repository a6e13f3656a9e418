from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import (
    ApiView,
    IgnoreFormatParameter,
    limit_to_workflows,
    require_workflow_allowed,
    validated_body,
)
from notifyflow.errors import ApplicationError, NotFoundError
from notifyflow.pagination import WorkflowPages

from .definition_schema import EXAMPLE_WORKFLOW
from .diagram import diagram
from .models import Workflow, WorkflowVersion
from .serializers import DiagramQuerySerializer, WorkflowInputSerializer, WorkflowOutputSerializer
from .services import workflow_save

# Swagger UI and ReDoc show this body ready to send.
WORKFLOW_REQUEST_EXAMPLE = OpenApiExample(
    "Order follow-up", value=EXAMPLE_WORKFLOW, request_only=True
)


def _save(request: Request, workflow: Workflow | None) -> Workflow:
    data = validated_body(request, WorkflowInputSerializer)
    require_workflow_allowed(request, data["key"])
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
        actor=f"api:{getattr(request.user, 'name', request.user)}",
    )


class WorkflowListCreateView(ApiView):
    serializer_class = WorkflowOutputSerializer
    pagination_class = WorkflowPages

    def get_queryset(self):
        return limit_to_workflows(
            self.request, Workflow.objects.select_related("current_version").order_by("key")
        )

    @extend_schema(responses=WorkflowOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request=WorkflowInputSerializer,
        responses={201: WorkflowOutputSerializer},
        examples=[WORKFLOW_REQUEST_EXAMPLE],
    )
    def post(self, request: Request) -> Response:
        workflow = _save(request, None)
        return Response(self.get_serializer(workflow).data, status=status.HTTP_201_CREATED)


class WorkflowDetailView(ApiView):
    serializer_class = WorkflowOutputSerializer
    lookup_field = "key"

    def get_queryset(self):
        return limit_to_workflows(self.request, Workflow.objects.select_related("current_version"))

    def get(self, request: Request, key: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    # No request example here: an example's body key must match the URL's, which a
    # static example cannot promise (POST /workflows/ shows the example workflow).
    @extend_schema(request=WorkflowInputSerializer)
    def put(self, request: Request, key: str) -> Response:
        workflow = _save(request, self.get_object())
        return Response(self.get_serializer(workflow).data)


class WorkflowDiagramView(ApiView):
    """The definition as a Mermaid flowchart or a Graphviz digraph, as text:
    every node with its type, every edge with its condition. 400 for an unknown format,
    404 for an unknown workflow or version."""

    lookup_field = "key"
    content_negotiation_class = IgnoreFormatParameter
    query_serializer_class = DiagramQuerySerializer

    def get_queryset(self):
        return limit_to_workflows(self.request, Workflow.objects.select_related("current_version"))

    @extend_schema(
        parameters=[DiagramQuerySerializer],
        responses={
            (200, "text/plain"): OpenApiResponse(
                response=OpenApiTypes.STR, description="Mermaid or DOT source"
            )
        },
    )
    def get(self, request: Request, key: str) -> HttpResponse:
        workflow = self.get_object()
        number = self.query.get("version")
        version = (
            workflow.current_version
            if number is None
            else WorkflowVersion.objects.filter(workflow=workflow, version=number).first()
        )
        if version is None:
            raise NotFoundError(
                code="unknown_version",
                field="version" if number is not None else None,
                message=f"version: workflow {workflow.key!r} has no version {number}"
                if number is not None
                else f"workflow {workflow.key!r} has no definition",
            )
        text = diagram(
            version.definition,
            format=self.query["format"],
            title=f"{workflow.key} v{version.version}",
        )
        return HttpResponse(text, content_type="text/plain; charset=utf-8")
