"""Throttle counters of ``throttle`` nodes: list them with their count in the window, reset a key
(``DELETE /api/v1/throttles/?scope=&key=``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView
from api.fields import QuerySerializer
from api.pagination import ByIdOldestFirst
from api_keys.authentication import request_key
from gates.models import ThrottleScope
from gates.throttles import throttle_reset, throttles_list

from ..serializers.throttles import (
    ThrottleFilterSerializer,
    ThrottleOutputSerializer,
    ThrottleResetOutputSerializer,
    ThrottleResetQuerySerializer,
)

# Reading counters is a read; resetting one lets instances through: an admin's act.
SCOPES = {"GET": "read", "DELETE": "admin"}


def _require_allowed(request: Request, query: dict[str, Any]) -> None:
    """A key limited to workflows reaches only workflow-scope counters of those
    workflows, named with ``workflow=``: a recipient's counters span workflows."""
    key = request_key(request)
    if not key.workflows:
        return
    workflow = query.get("workflow")
    if query.get("scope") != ThrottleScope.WORKFLOW or workflow is None:
        raise exceptions.PermissionDenied(
            "API key limited to workflows: give scope=workflow and one of its workflow="
        )
    if not key.allows_workflow(workflow):
        raise exceptions.PermissionDenied(f"API key may not use workflow {workflow!r}")


class ThrottleListView(ApiView):
    serializer_class = ThrottleOutputSerializer
    pagination_class = ByIdOldestFirst
    query_serializer_class = ThrottleFilterSerializer
    required_scope = SCOPES

    def get_query_serializer_class(self) -> type[QuerySerializer] | None:
        if self.request.method == "DELETE":
            return ThrottleResetQuerySerializer
        return super().get_query_serializer_class()

    @extend_schema(
        parameters=[ThrottleFilterSerializer],
        responses=ThrottleOutputSerializer(many=True),
        description="Throttle counters matching every filter given, each with its hits "
        "in the window now, its limit and window, its oldest hit and when it has room.",
    )
    def get(self, request: Request) -> Response:
        _require_allowed(request, self.query)
        page = self.paginate_queryset(throttles_list(**self.query))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        parameters=[ThrottleResetQuerySerializer],
        request=None,
        responses={200: ThrottleResetOutputSerializer},
        description="Reset a throttle key: its counters (in the scope, narrowed by "
        "workflow= and node=, or recipient=) are deleted and the key has room at once.",
    )
    def delete(self, request: Request) -> Response:
        _require_allowed(request, self.query)
        return Response({"reset": throttle_reset(**self.query)})
