"""Workflows: create, read and replace them; their diagram, stats, preview and test
send; pause and resume."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, IgnoreFormatParameter, no_body, validated_body
from api.pagination import WorkflowPages
from api_keys.authentication import request_key
from executions.preview import workflow_preview
from executions.selectors import workflow_stats
from notifyflow.errors import ApplicationError, NotFoundError
from triggers.services import workflow_pause, workflow_resume, workflow_test_send
from workflows.definition_schema import EXAMPLE_WORKFLOW
from workflows.diagram import diagram
from workflows.models import Workflow, WorkflowVersion
from workflows.services import workflow_save

from ..permissions import actor, require_workflow, visible_workflows
from ..serializers.triggers import TriggerOutputSerializer
from ..serializers.workflows import (
    DiagramQuerySerializer,
    PreviewInputSerializer,
    PreviewOutputSerializer,
    TestSendInputSerializer,
    WorkflowInputSerializer,
    WorkflowOutputSerializer,
    WorkflowStatsOutputSerializer,
)

# Swagger UI and ReDoc show this body ready to send.
WORKFLOW_REQUEST_EXAMPLE = OpenApiExample(
    "Order follow-up", value=EXAMPLE_WORKFLOW, request_only=True
)


def _save(request: Request, workflow: Workflow | None) -> Workflow:
    data = validated_body(request, WorkflowInputSerializer)
    key = request_key(request)
    require_workflow(key, data["key"])
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
        actor=actor(key),
        critical=data.get("critical"),
        categories=data.get("categories"),
        concurrency=data.get("concurrency"),
        priority=data.get("priority"),
        default_locale=data.get("default_locale"),
    )


def _require_visible_workflow(request: Request, key: str) -> None:
    """404 unless the caller's key may use the workflow (the services answer 404 for an
    unknown one: no query here for a key without a workflow list)."""
    api_key = request_key(request)
    if api_key.workflows:
        get_object_or_404(visible_workflows(Workflow.objects.only("id"), api_key), key=key)


class WorkflowListCreateView(ApiView):
    serializer_class = WorkflowOutputSerializer
    pagination_class = WorkflowPages

    def get_queryset(self):
        return visible_workflows(
            Workflow.objects.select_related("current_version").order_by("key"),
            request_key(self.request),
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
        return visible_workflows(
            Workflow.objects.select_related("current_version"), request_key(self.request)
        )

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
        return visible_workflows(
            Workflow.objects.select_related("current_version"), request_key(self.request)
        )

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


class WorkflowStatsView(ApiView):
    """Instances per status and per-node executions, successes and failures over all
    versions; 404 unknown workflow."""

    serializer_class = WorkflowStatsOutputSerializer

    def get(self, request: Request, key: str) -> Response:
        _require_visible_workflow(request, key)
        return Response(self.get_serializer(workflow_stats(key=key)).data)


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
            workflow_preview(
                key=key,
                payload=data["payload"],
                version=data.get("version"),
                recipient_id=data.get("recipient_id"),
                locale=data.get("locale"),
            )
        )


class WorkflowTestSendView(ApiView):
    """Run the workflow for real to one existing recipient, marked test (``test: true``,
    left out of the stats), in ``locale`` if given: 202 with the new instance; 404 for an
    unknown recipient, 400 ``invalid_locale``."""

    serializer_class = TriggerOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(request=TestSendInputSerializer, responses={202: TriggerOutputSerializer})
    def post(self, request: Request, key: str) -> Response:
        data = validated_body(request, TestSendInputSerializer)
        api_key = request_key(request)
        require_workflow(api_key, key)
        instance = workflow_test_send(
            workflow=key,
            recipient_id=data["recipient_id"],
            payload=data["payload"],
            actor=actor(api_key),
            api_key=api_key,
            locale=data.get("locale"),
        )
        return Response(self.get_serializer(instance).data, status=status.HTTP_202_ACCEPTED)


class WorkflowPauseView(ApiView):
    """Pause (no step starts) or resume (due instances dispatched at once) a workflow."""

    serializer_class = WorkflowOutputSerializer
    lookup_field = "key"
    pause = True

    def get_queryset(self):
        return visible_workflows(
            Workflow.objects.select_related("current_version"), request_key(self.request)
        )

    @extend_schema(request=None, responses={200: WorkflowOutputSerializer})
    def post(self, request: Request, key: str) -> Response:
        no_body(request)
        workflow = self.get_object()
        who = actor(request_key(request))
        if self.pause:
            workflow_pause(workflow=workflow, actor=who)
        else:
            workflow_resume(workflow=workflow, actor=who)
        return Response(self.get_serializer(workflow).data)
