"""Status webhook endpoints (admin scope): create, read, replace, delete, rotate the
secret, replay a time range, and an endpoint's messages with their attempts; the logic
is in ``status_webhooks.endpoints``.

An endpoint receives events of every workflow it names (or all of them) and events that
belong to no workflow, so a key limited to workflows may not manage endpoints (403)."""

from __future__ import annotations

from uuid import UUID

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body, paginated_list, validated_body
from api.pagination import MAX_PAGE_SIZE, ByIdOldestFirst, CursorPagination
from api_keys.authentication import request_key
from notifyflow.errors import NotFoundError
from status_webhooks.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_update,
    messages_replay,
    secret_rotate,
)
from status_webhooks.models import WebhookAttempt, WebhookEndpoint, WebhookMessage

from ..permissions import actor
from ..serializers.webhook_endpoints import (
    ReplayInputSerializer,
    ReplayOutputSerializer,
    WebhookEndpointInputSerializer,
    WebhookEndpointOutputSerializer,
    WebhookEndpointSecretOutputSerializer,
    WebhookMessageFilterSerializer,
    WebhookMessageOutputSerializer,
)

ID_PARAMETER = OpenApiParameter(
    "id", UUID, OpenApiParameter.PATH, description="Webhook endpoint id"
)
SCOPES = {"GET": "admin", "POST": "admin", "PUT": "admin", "DELETE": "admin"}


class MessagesNewestFirst(CursorPagination):
    """Served by webhook_message_endpoint (endpoint, created_at)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class EndpointView(ApiView):
    required_scope = SCOPES
    # For DRF's OPTIONS answer, which looks the object up the generic way.
    queryset = WebhookEndpoint.objects.all()
    lookup_field = "id"

    def initial(self, request: Request, *args: object, **kwargs: object) -> None:
        super().initial(request, *args, **kwargs)
        if request_key(request).workflows:
            raise exceptions.PermissionDenied(
                "API key limited to workflows: webhook endpoints span every workflow"
            )

    def endpoint(self, endpoint_id: UUID) -> WebhookEndpoint:
        found = WebhookEndpoint.objects.filter(pk=endpoint_id).first()
        if found is None:
            raise NotFoundError(code="not_found", field=None, message="no such webhook endpoint")
        return found

    def actor(self) -> str:
        return actor(request_key(self.request))


def _fields(request: Request) -> dict:
    body = validated_body(request, WebhookEndpointInputSerializer)
    return {
        "url": body["url"],
        "event_types": body["event_types"],
        "workflows": body["workflows"],
        "is_active": body["is_active"],
        "description": body["description"],
    }


class WebhookEndpointListCreateView(EndpointView):
    serializer_class = WebhookEndpointOutputSerializer
    pagination_class = ByIdOldestFirst

    @extend_schema(
        responses=WebhookEndpointOutputSerializer(many=True),
        operation_id="v1_webhook_endpoints_list",
        description="Every webhook endpoint (never its secret).",
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(WebhookEndpoint.objects.all())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request=WebhookEndpointInputSerializer,
        responses={201: WebhookEndpointSecretOutputSerializer},
        description="Create an endpoint. The answer carries its signing `secret`, shown this once.",
    )
    def post(self, request: Request) -> Response:
        endpoint = endpoint_create(**_fields(request), actor=self.actor())
        return Response(
            WebhookEndpointSecretOutputSerializer(endpoint).data, status=status.HTTP_201_CREATED
        )


class WebhookEndpointDetailView(EndpointView):
    serializer_class = WebhookEndpointOutputSerializer

    @extend_schema(parameters=[ID_PARAMETER], responses=WebhookEndpointOutputSerializer)
    def get(self, request: Request, id: UUID) -> Response:
        return Response(self.get_serializer(self.endpoint(id)).data)

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=WebhookEndpointInputSerializer,
        responses=WebhookEndpointOutputSerializer,
        description="Replace the endpoint (fields left out take their defaults); the "
        "secret is kept. `is_active: true` on a disabled endpoint enables it.",
    )
    def put(self, request: Request, id: UUID) -> Response:
        endpoint = self.endpoint(id)
        endpoint = endpoint_update(endpoint=endpoint, **_fields(request), actor=self.actor())
        return Response(self.get_serializer(endpoint).data)

    @extend_schema(parameters=[ID_PARAMETER], responses={204: None})
    def delete(self, request: Request, id: UUID) -> Response:
        endpoint_delete(endpoint=self.endpoint(id), actor=self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookEndpointRotateView(EndpointView):
    serializer_class = WebhookEndpointSecretOutputSerializer

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=None,
        responses=WebhookEndpointSecretOutputSerializer,
        description="A new signing secret, shown this once; the previous one keeps "
        "signing next to it for NOTIFYFLOW_STATUS_WEBHOOK_ROTATION_OVERLAP_S (24 h).",
    )
    def post(self, request: Request, id: UUID) -> Response:
        no_body(request)
        endpoint = secret_rotate(endpoint=self.endpoint(id), actor=self.actor())
        return Response(self.get_serializer(endpoint).data)


class WebhookEndpointReplayView(EndpointView):
    serializer_class = ReplayOutputSerializer

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=ReplayInputSerializer,
        responses=ReplayOutputSerializer,
        description="Send again the endpoint's messages created in [since, until), "
        "whatever their status, with their ids and a fresh retry schedule. 409 "
        "`endpoint_disabled` for a disabled endpoint.",
    )
    def post(self, request: Request, id: UUID) -> Response:
        body = validated_body(request, ReplayInputSerializer)
        count = messages_replay(
            endpoint=self.endpoint(id),
            since=body["since"],
            until=body["until"],
            actor=self.actor(),
        )
        return Response({"replayed": count})


class WebhookEndpointMessagesView(EndpointView):
    serializer_class = WebhookMessageOutputSerializer
    pagination_class = MessagesNewestFirst
    query_serializer_class = WebhookMessageFilterSerializer

    def get_queryset(self) -> QuerySet[WebhookMessage]:
        return WebhookMessage.objects.prefetch_related(
            Prefetch("tries", queryset=WebhookAttempt.objects.order_by("attempted_at"))
        )

    @extend_schema(
        parameters=[ID_PARAMETER, WebhookMessageFilterSerializer],
        responses=WebhookMessageOutputSerializer(many=True),
        description="The endpoint's messages, newest first, each with its attempts.",
    )
    def get(self, request: Request, id: UUID) -> Response:
        endpoint = self.endpoint(id)
        return paginated_list(
            self,
            self.get_queryset().filter(endpoint=endpoint),
            {"status": "status", "type": "type"},
        )
