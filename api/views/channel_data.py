"""A recipient's channel data (docs/api.md#channel-data): its push devices and chat
connections, read, replaced or cleared per channel, and a device added or removed
by id. People endpoints: a key limited to workflows is refused."""

from __future__ import annotations

import uuid
from typing import cast

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body, validated_body
from api_keys.authentication import request_key
from notifyflow.errors import ApplicationError
from recipients.channel_data import (
    chat_connections_clear,
    chat_connections_get,
    chat_connections_set,
    push_device_add,
    push_device_remove,
    push_devices_clear,
    push_devices_get,
    push_devices_set,
)
from recipients.channel_inputs import DeviceInput
from recipients.models import Recipient
from recipients.services import recipient_or_404

from ..permissions import PEOPLE_PERMISSIONS, actor
from ..serializers.channel_data import (
    ChatChannelDataInputSerializer,
    ChatChannelDataSerializer,
    ChatConnectionSerializer,
    PushChannelDataInputSerializer,
    PushChannelDataSerializer,
    PushDeviceInputSerializer,
    PushDeviceSerializer,
)
from ..serializers.recipients import ID_SCHEMA, valid_recipient_id

ID_PARAMETER = OpenApiParameter("id", ID_SCHEMA, OpenApiParameter.PATH, description="Recipient id")
# Reads: read (or admin); writes: trigger (or admin), as the recipient's own fields.
SCOPES = {"GET": "read", "PUT": "trigger", "POST": "trigger", "DELETE": "trigger"}
REPLACES = (
    "Replaces the channel's data: what the body lists is kept or added (a device with the "
    "same provider and token, a connection with the same target, keeps its `id`), the rest "
    "is removed (an audit row each). 404 for an unknown recipient."
)


# A view of one recipient's channel data (``id`` in the path). (A comment: drf-spectacular
# would publish a docstring as the description of every operation below.)
class _RecipientChannelData(ApiView):
    permission_classes = PEOPLE_PERMISSIONS
    required_scope = SCOPES

    def get_object(self) -> Recipient:
        # Only DRF's OPTIONS metadata calls it: an id that names no recipient is "no
        # object".
        try:
            return recipient_or_404(valid_recipient_id(self.kwargs.get("id")))
        except ApplicationError:
            raise Http404 from None


class PushChannelDataView(_RecipientChannelData):
    """The recipient's push devices (FCM, APNs, Web Push), oldest first; 404 for an
    unknown recipient."""

    serializer_class = PushChannelDataSerializer

    @extend_schema(parameters=[ID_PARAMETER], responses={200: PushChannelDataSerializer})
    def get(self, request: Request, id: str) -> Response:
        devices = push_devices_get(recipient_id=valid_recipient_id(id))
        return Response({"devices": PushDeviceSerializer(devices, many=True).data})

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=PushChannelDataInputSerializer,
        responses={200: PushChannelDataSerializer},
        description=f"{REPLACES} At most 20 devices; a Web Push endpoint's host must be on "
        "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS (`host_not_allowed`).",
    )
    def put(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        body = validated_body(request, PushChannelDataInputSerializer)
        devices = push_devices_set(
            recipient_id=recipient_id, devices=body["devices"], actor=actor(request_key(request))
        )
        return Response({"devices": PushDeviceSerializer(devices, many=True).data})

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses={204: None})
    def delete(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        no_body(request)
        push_devices_clear(recipient_id=recipient_id, actor=actor(request_key(request)))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChatChannelDataView(_RecipientChannelData):
    """The recipient's chat connections (Slack channel or user; Slack, Microsoft Teams or
    Discord incoming webhook), oldest first; 404 for an unknown recipient."""

    serializer_class = ChatChannelDataSerializer

    @extend_schema(parameters=[ID_PARAMETER], responses={200: ChatChannelDataSerializer})
    def get(self, request: Request, id: str) -> Response:
        connections = chat_connections_get(recipient_id=valid_recipient_id(id))
        return Response({"connections": ChatConnectionSerializer(connections, many=True).data})

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=ChatChannelDataInputSerializer,
        responses={200: ChatChannelDataSerializer},
        description=f"{REPLACES} At most 20 connections; a webhook URL's host must be on "
        "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS (`host_not_allowed`).",
    )
    def put(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        body = validated_body(request, ChatChannelDataInputSerializer)
        connections = chat_connections_set(
            recipient_id=recipient_id,
            connections=body["connections"],
            actor=actor(request_key(request)),
        )
        return Response({"connections": ChatConnectionSerializer(connections, many=True).data})

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses={204: None})
    def delete(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        no_body(request)
        chat_connections_clear(recipient_id=recipient_id, actor=actor(request_key(request)))
        return Response(status=status.HTTP_204_NO_CONTENT)


class PushDeviceListView(_RecipientChannelData):
    serializer_class = PushDeviceSerializer

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=PushDeviceInputSerializer,
        responses={201: PushDeviceSerializer, 200: PushDeviceSerializer},
        description="Adds a device: 201 with its `id`; 200 when the recipient has a device "
        "with that provider and token already (its locale, time zone and app updated). 409 "
        "`too_many_devices` when the recipient has 20; 404 for an unknown recipient.",
    )
    def post(self, request: Request, id: str) -> Response:
        recipient_id = valid_recipient_id(id)
        # The serializer reads the body into the service's input (channel_inputs).
        device = cast(DeviceInput, validated_body(request, PushDeviceInputSerializer))
        row, created = push_device_add(recipient_id=recipient_id, device=device)
        return Response(
            PushDeviceSerializer(row).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class PushDeviceDetailView(_RecipientChannelData):
    serializer_class = PushDeviceSerializer

    @extend_schema(
        parameters=[ID_PARAMETER],
        request=None,
        responses={204: None},
        description="Removes the device (an audit row). 404 unless the recipient has it.",
    )
    def delete(self, request: Request, id: str, device_id: uuid.UUID) -> Response:
        recipient_id = valid_recipient_id(id)
        no_body(request)
        push_device_remove(
            recipient_id=recipient_id, device_id=device_id, actor=actor(request_key(request))
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
