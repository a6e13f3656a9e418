from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView, get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import paginated_list
from notifyflow.pagination import StepLogsOldestFirst
from triggers.models import TriggerInstance
from triggers.serializers import TriggerListFilterSerializer, TriggerOutputSerializer
from triggers.views import TriggerListCreateView

from .models import StepExecutionLog, instance_ids_sent_to
from .serializers import StepLogFilterSerializer, StepLogOutputSerializer


class TriggerListByRecipientFilterSerializer(TriggerListFilterSerializer):
    recipient = serializers.CharField(
        required=False,
        max_length=320,
        help_text="An email address or phone number a delivery of the instance was sent to",
    )


def _sent_to(queryset: QuerySet, recipient: str) -> QuerySet:
    # The ids first (delivery_recipient index), then the instances by primary key: a
    # join or IN-subquery lets the planner walk instances by created_at instead.
    return queryset.filter(pk__in=instance_ids_sent_to(recipient))


# GET/POST /api/v1/triggers/ with ?recipient= added: deliveries belong to this layer,
# so the filter is added here and notifyflow/urls.py points at this view. (A comment,
# not a docstring: drf-spectacular would publish a docstring as the API description.)
class TriggerListView(TriggerListCreateView):
    filter_serializer = TriggerListByRecipientFilterSerializer
    filter_lookups = {**TriggerListCreateView.filter_lookups, "recipient": _sent_to}

    @extend_schema(
        parameters=[TriggerListByRecipientFilterSerializer],
        responses=TriggerOutputSerializer(many=True),
        description="Trigger instances, newest first; `recipient` finds those with a "
        "delivery to an email address or phone number.",
    )
    def get(self, request: Request) -> Response:
        return self.list(request)


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
