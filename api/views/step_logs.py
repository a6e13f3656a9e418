"""Step logs across instances, filtered by instance, node or skip reason."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, paginated_list
from api.pagination import StepLogsOldestFirst
from api_keys.authentication import request_key
from executions.models import StepExecutionLog

from ..permissions import visible_instances
from ..serializers.step_logs import StepLogFilterSerializer, StepLogOutputSerializer


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
                request_key(request),
                prefix="trigger__",
            ),
            {"trigger": "trigger_id", "node": "node_id", "skip_reason": "skip_reason"},
        )
