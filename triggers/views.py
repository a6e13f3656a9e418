from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import paginated_list, validated_body
from notifyflow.pagination import NewestFirst

from .models import TriggerInstance
from .serializers import (
    TriggerCreateInputSerializer,
    TriggerListFilterSerializer,
    TriggerOutputSerializer,
)
from .services import trigger_create


class TriggerListCreateView(GenericAPIView):
    serializer_class = TriggerOutputSerializer
    pagination_class = NewestFirst

    def get_queryset(self):
        return TriggerInstance.objects.select_related("workflow", "workflow_version")

    @extend_schema(
        request=TriggerCreateInputSerializer,
        responses={201: TriggerOutputSerializer, 200: TriggerOutputSerializer},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, TriggerCreateInputSerializer)
        result = trigger_create(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            payload=body["payload"],
        )
        data = TriggerOutputSerializer(result.instance).data
        if result.created:
            return Response(data, status=status.HTTP_201_CREATED)
        return Response(data, status=status.HTTP_200_OK, headers={"Idempotent-Replayed": "true"})

    @extend_schema(parameters=[TriggerListFilterSerializer])
    def get(self, request: Request) -> Response:
        return paginated_list(
            self,
            request,
            self.get_queryset(),
            TriggerListFilterSerializer,
            {"workflow": "workflow__key", "status": "status", "idempotency_key": "idempotency_key"},
        )


class TriggerDetailView(GenericAPIView):
    serializer_class = TriggerOutputSerializer
    lookup_field = "id"

    def get_queryset(self):
        return TriggerInstance.objects.select_related("workflow", "workflow_version")

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH)])
    def get(self, request: Request, id: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)
