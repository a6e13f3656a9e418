"""Events: one received event starts the workflows bound to its name and reaches the
running instances interested in it; the logic is in ``triggers.events``."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, validated_body
from api_keys.authentication import request_key
from api_keys.models import ApiKey
from triggers.events import event_receive
from triggers.models import TriggerInstance
from triggers.services import RecipientEntry

from ..permissions import actor, is_restricted, visible_instances
from ..serializers.events import (
    EventInputSerializer,
    EventOutputSerializer,
    EventRecordSerializer,
)
from ..serializers.trigger_recipients import RecipientsField


class EventReceiveView(ApiView):
    serializer_class = EventOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(request=EventInputSerializer, responses={202: EventOutputSerializer})
    def post(self, request: Request) -> Response:
        body = validated_body(request, EventInputSerializer)
        key = request_key(request)
        if key.workflows and body["subjects"]:
            # Subjects reach instances of any workflow.
            raise PermissionDenied("an API key limited to workflows may not send subjects")
        result = event_receive(
            name=body["name"],
            event_id=body["event_id"],
            context=body["context"],
            subjects=body["subjects"],
            workflows=key.workflows or None,
            actor=actor(key),
            api_key=key,
            recipients=_recipients(body["context"]),
        )
        return Response(
            {
                "event": EventRecordSerializer(result.record).data,
                "outcomes": [o.as_json() for o in result.outcomes],
                "delivered": len(result.delivered),
                "instances": [str(i) for i in _readable(key, result.delivered, 100)],
            },
            status=status.HTTP_202_ACCEPTED,
        )


def _recipients(context: dict) -> list[RecipientEntry] | None:
    """``context.recipients`` as a trigger's ``recipients`` (each binding triggers those
    people); a bad entry is a 400 naming ``context.recipients[i]``."""
    if "recipients" not in context:
        return None
    try:
        return RecipientsField().run_validation(context["recipients"])
    except ValidationError as exc:
        raise ValidationError({"context": {"recipients": exc.detail}}) from exc


def _readable(key: ApiKey, instance_ids: list[uuid.UUID], most: int) -> list[uuid.UUID]:
    """The first ``most`` of the instances an event reached that ``key`` may read, in
    order: a trigger key learns no id of another key's instances from an event."""
    if not is_restricted(key):
        return instance_ids[:most]
    found: list[uuid.UUID] = []
    for start in range(0, len(instance_ids), 500):  # SQLite's parameter limit
        chunk = instance_ids[start : start + 500]
        readable = set(
            visible_instances(TriggerInstance.objects.filter(pk__in=chunk), key)
            .order_by()
            .values_list("id", flat=True)
        )
        found += [i for i in chunk if i in readable]
        if len(found) >= most:
            break
    return found[:most]
