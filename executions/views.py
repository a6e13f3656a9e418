from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView, get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import paginated_list
from notifyflow.pagination import StepLogsOldestFirst
from triggers.models import TriggerInstance

from .models import StepExecutionLog
from .serializers import StepLogFilterSerializer, StepLogOutputSerializer


class TriggerStepsView(GenericAPIView):
    """Step logs of one trigger instance, oldest first."""

    serializer_class = StepLogOutputSerializer
    pagination_class = StepLogsOldestFirst

    @extend_schema(responses=StepLogOutputSerializer(many=True))
    def get(self, request: Request, id: str) -> Response:
        get_object_or_404(TriggerInstance.objects.only("id"), pk=id)
        queryset = StepExecutionLog.objects.filter(trigger_id=id).select_related("workflow")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class StepLogListView(GenericAPIView):
    serializer_class = StepLogOutputSerializer
    pagination_class = StepLogsOldestFirst

    @extend_schema(
        parameters=[StepLogFilterSerializer], responses=StepLogOutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return paginated_list(
            self,
            request,
            StepExecutionLog.objects.select_related("workflow"),
            StepLogFilterSerializer,
            {"trigger": "trigger_id", "node": "node_id"},
        )
