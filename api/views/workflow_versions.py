"""A workflow's versions: the history, one version with its definition, the diff between
two, and restoring an old one as a new version (workflows.version_history)."""

from __future__ import annotations

from typing import cast

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body
from api.pagination import VersionsNewestFirst
from api_keys.authentication import request_key
from workflows.models import Workflow, WorkflowVersion
from workflows.version_history import (
    workflow_version_diff,
    workflow_version_get,
    workflow_version_restore,
)

from ..permissions import actor, visible_workflows
from ..serializers.workflow_versions import (
    VersionDiffOutputSerializer,
    VersionDiffQuerySerializer,
    WorkflowVersionDetailOutputSerializer,
    WorkflowVersionOutputSerializer,
)

# The path's version number; a number the workflow has no version of is a 404.
VERSION_PARAMETER = OpenApiParameter(
    "version",
    {"type": "integer", "minimum": 1, "maximum": 2147483647},
    OpenApiParameter.PATH,
    description="A version number of the workflow",
)


def _visible_workflow(request: Request, key: str) -> Workflow:
    """The workflow ``key``, 404 when there is none or the caller's key is limited to
    other workflows."""
    return get_object_or_404(
        visible_workflows(Workflow.objects.all(), request_key(request)), key=key
    )


def _version_data(workflow: Workflow, version: WorkflowVersion) -> dict:
    context = {"current_version_id": workflow.current_version_id}
    return WorkflowVersionDetailOutputSerializer(version, context=context).data


class WorkflowVersionListView(ApiView):
    """The workflow's versions, newest first, without their definitions."""

    serializer_class = WorkflowVersionOutputSerializer
    pagination_class = VersionsNewestFirst

    @extend_schema(responses=WorkflowVersionOutputSerializer(many=True))
    def get(self, request: Request, key: str) -> Response:
        workflow = _visible_workflow(request, key)
        versions = WorkflowVersion.objects.filter(workflow=workflow).defer("definition")
        page = self.paginate_queryset(versions)
        context = {
            **self.get_serializer_context(),
            "current_version_id": workflow.current_version_id,
        }
        serializer = self.get_serializer(page, many=True, context=context)
        return self.get_paginated_response(serializer.data)


class WorkflowVersionDetailView(ApiView):
    """One version with its definition; 404 ``unknown_version``."""

    serializer_class = WorkflowVersionDetailOutputSerializer

    @extend_schema(parameters=[VERSION_PARAMETER])
    def get(self, request: Request, key: str, version: int) -> Response:
        workflow = _visible_workflow(request, key)
        found = workflow_version_get(workflow=workflow, version=version)
        return Response(_version_data(workflow, found))


class WorkflowVersionDiffView(ApiView):
    """What changed from version ``against`` (the one before, by default) to this one,
    as a unified diff of the normalised definitions; 404 ``unknown_version`` naming
    ``version`` or ``against``."""

    serializer_class = VersionDiffOutputSerializer
    query_serializer_class = VersionDiffQuerySerializer

    @extend_schema(parameters=[VERSION_PARAMETER, VersionDiffQuerySerializer])
    def get(self, request: Request, key: str, version: int) -> Response:
        workflow = _visible_workflow(request, key)
        found = workflow_version_get(workflow=workflow, version=version)
        number = self.query.get("against", version - 1)
        against = (
            workflow_version_get(workflow=workflow, version=number, field="against")
            if number >= 1
            else None
        )
        diff = workflow_version_diff(workflow=workflow, version=found, against=against)
        data = {
            "version": version,
            "against": against.version if against is not None else None,
            "diff": diff,
        }
        return Response(self.get_serializer(data).data)


class WorkflowVersionRestoreView(ApiView):
    """A new current version with this version's definition (message
    ``restored from v{version}``); instances keep the version they pinned. 404
    ``unknown_version``; 409 ``already_current`` when the current definition is that one;
    400 when the old definition no longer validates."""

    serializer_class = WorkflowVersionDetailOutputSerializer

    @extend_schema(
        parameters=[VERSION_PARAMETER],
        request=None,
        responses={201: WorkflowVersionDetailOutputSerializer},
    )
    def post(self, request: Request, key: str, version: int) -> Response:
        no_body(request)
        workflow = _visible_workflow(request, key)
        restored = workflow_version_restore(
            workflow=workflow, version=version, actor=actor(request_key(request))
        )
        # A restore always leaves a current version: the one it added.
        current = cast(WorkflowVersion, restored.current_version)
        return Response(_version_data(restored, current), status=status.HTTP_201_CREATED)
