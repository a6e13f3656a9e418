"""Lists (topics): create or rename one, its members (add, remove, page through), and
every list with its member count."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, validated_body
from api.pagination import ListsByKey, RecipientsById
from notifyflow.errors import ApplicationError
from recipients.lists import (
    list_members,
    list_members_add,
    list_members_remove,
    list_or_404,
    list_put,
    lists_with_member_counts,
)
from recipients.models import RecipientList

from ..openapi import DeleteWithBodySchema
from ..permissions import PEOPLE_PERMISSIONS
from ..serializers.lists import (
    ListInputSerializer,
    ListOutputSerializer,
    MembersAddedSerializer,
    MembersInputSerializer,
    MembersRemovedSerializer,
)
from ..serializers.recipients import RecipientOutputSerializer

MAX_KEY_LENGTH = RecipientList._meta.get_field("key").max_length or 100
KEY_PARAMETER = OpenApiParameter(
    "key",
    {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "maxLength": MAX_KEY_LENGTH},
    OpenApiParameter.PATH,
    description="List key (a slug)",
)
SCOPES = {"GET": "read", "PUT": "trigger", "POST": "trigger", "DELETE": "trigger"}


class ListListView(ApiView):
    serializer_class = ListOutputSerializer
    pagination_class = ListsByKey
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = SCOPES

    @extend_schema(responses=ListOutputSerializer(many=True), description="Lists by key.")
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(lists_with_member_counts())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ListDetailView(ApiView):
    serializer_class = ListOutputSerializer
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = SCOPES

    def get_object(self) -> RecipientList:
        # Only DRF's OPTIONS metadata calls it.
        try:
            return list_or_404(self.kwargs.get("key", ""))
        except ApplicationError:
            raise Http404 from None

    @extend_schema(parameters=[KEY_PARAMETER])
    def get(self, request: Request, key: str) -> Response:
        recipient_list = list_or_404(key)
        return Response(self.get_serializer(recipient_list).data)

    @extend_schema(
        parameters=[KEY_PARAMETER],
        request=ListInputSerializer,
        responses={200: ListOutputSerializer, 201: ListOutputSerializer},
        description="201: created. 200: renamed.",
    )
    def put(self, request: Request, key: str) -> Response:
        if len(key) > MAX_KEY_LENGTH:
            raise ApplicationError(
                code="too_long", field="key", message=f"key: at most {MAX_KEY_LENGTH} characters"
            )
        body = validated_body(request, ListInputSerializer)
        recipient_list, created = list_put(key=key, name=body["name"])
        return Response(
            self.get_serializer(recipient_list).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ListMembersView(ApiView):
    schema = DeleteWithBodySchema()
    serializer_class = RecipientOutputSerializer
    pagination_class = RecipientsById
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = SCOPES

    @extend_schema(
        parameters=[KEY_PARAMETER],
        responses=RecipientOutputSerializer(many=True),
        description="The list's members by id.",
    )
    def get(self, request: Request, key: str) -> Response:
        page = self.paginate_queryset(list_members(key=key))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        parameters=[KEY_PARAMETER],
        request=MembersInputSerializer,
        responses={200: MembersAddedSerializer},
        description="Adds up to 1,000 recipients; ids not known yet are created empty. Idempotent.",
    )
    def post(self, request: Request, key: str) -> Response:
        body = validated_body(request, MembersInputSerializer)
        added, created = list_members_add(key=key, recipient_ids=body["recipients"])
        return Response({"added": added, "created": created})

    @extend_schema(
        parameters=[KEY_PARAMETER],
        request=MembersInputSerializer,
        responses={200: MembersRemovedSerializer},
        description="Removes up to 1,000 recipients from the list (the recipients stay). "
        "Idempotent.",
    )
    def delete(self, request: Request, key: str) -> Response:
        body = validated_body(request, MembersInputSerializer)
        removed = list_members_remove(key=key, recipient_ids=body["recipients"])
        return Response({"removed": removed})
