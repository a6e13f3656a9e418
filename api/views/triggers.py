"""Trigger instances: create (one or in bulk), list, read, cancel, retry, run now; an
event for one instance; its steps, timeline and deliveries."""

from __future__ import annotations

from uuid import UUID

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, Lookup, no_body, paginated_list, validated_body
from api.pagination import ByIdOldestFirst, NewestFirst, StepLogsOldestFirst
from api.parsers import PartsCheckedJSONParser
from api_keys.authentication import request_key
from executions.models import Delivery, StepExecutionLog, instance_ids_sent_to
from executions.selectors import instance_timeline
from notifyflow.errors import ApplicationError, NotFoundError
from triggers.inbox import deliver_to_instance
from triggers.models import TriggerInstance
from triggers.models.fanouts import FanOut
from triggers.services import (
    KeyCancelResult,
    instance_cancel,
    instance_cancel_by_key,
    instance_retry,
    instance_run_now,
    trigger_create,
    trigger_create_bulk,
    trigger_create_for_recipients,
)

from ..permissions import actor, require_visible_instance, require_workflow, visible_instances
from ..serializers.step_logs import StepLogOutputSerializer
from ..serializers.trigger_recipients import (
    FanOutOutputSerializer,
    KeyCancelOutputSerializer,
    PeopleTriggerOutputSerializer,
)
from ..serializers.triggers import (
    CancelByKeyInputSerializer,
    CancelInputSerializer,
    DeliveryOutputSerializer,
    InstanceEventInputSerializer,
    InstanceEventOutputSerializer,
    TimelineOutputSerializer,
    TriggerBulkInputSerializer,
    TriggerBulkOutputSerializer,
    TriggerCreateInputSerializer,
    TriggerListFilterSerializer,
    TriggerOutputSerializer,
    TriggerSummarySerializer,
)


def _sent_to(queryset: QuerySet, recipient: str) -> QuerySet:
    """Instances triggered for the recipient with id ``recipient``, and those with a
    delivery sent to it as an address. The ids first (the unique index that leads with
    the recipient, the delivery_recipient index), then the instances by primary key: a
    join or IN-subquery lets the planner walk instances by created_at instead."""
    ids = set(instance_ids_sent_to(recipient))
    ids.update(
        TriggerInstance.objects.order_by()
        .filter(recipient_id=recipient)
        .values_list("id", flat=True)[:_RECIPIENT_IDS_MAX]
    )
    return queryset.filter(pk__in=ids)


# The instances of one person a page can be cut from (newest first, by the pagination).
_RECIPIENT_IDS_MAX = 10_000


_CREATED = PolymorphicProxySerializer(
    component_name="TriggerCreated",
    serializers=[TriggerOutputSerializer, PeopleTriggerOutputSerializer],
    resource_type_field_name=None,
)
_CANCELLED_BY_KEY = PolymorphicProxySerializer(
    component_name="CancelledByKey",
    serializers=[TriggerOutputSerializer, KeyCancelOutputSerializer],
    resource_type_field_name=None,
)


class TriggerListCreateView(ApiView):
    serializer_class = TriggerOutputSerializer
    pagination_class = NewestFirst
    required_scope = {"POST": "trigger", "GET": "read_own"}
    query_serializer_class = TriggerListFilterSerializer
    filter_lookups: dict[str, Lookup] = {
        "workflow": "workflow__key",
        "status": "status",
        "idempotency_key": "idempotency_key",
        "include_payload": lambda queryset, include: (
            queryset if include else queryset.defer("payload")
        ),
        "recipient": _sent_to,
    }

    def get_queryset(self):
        return visible_instances(
            TriggerInstance.objects.select_related("workflow", "workflow_version"),
            request_key(self.request),
        )

    @extend_schema(
        request=TriggerCreateInputSerializer,
        responses={201: _CREATED, 200: _CREATED},
        description="With `recipients`: one instance per distinct recipient under the key, "
        "answered `{workflow, idempotency_key, instances: [{recipient, id, status}], "
        "fanout?}` - 201 if anything was created, else 200 with `Idempotent-Replayed: true`; "
        "400 `unknown_list` naming `recipients[i]`. Without: 201: a new instance. 200 with "
        "`Idempotent-Replayed: true`: a repeat of "
        "(workflow, idempotency_key) - the instance as the first call made it; the repeat's "
        "payload is ignored. 409 `idempotency_conflict`: the key's instance is one this API "
        "key may not read (a `trigger` key reads only what it created); nothing of it is in "
        "the answer.",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, TriggerCreateInputSerializer)
        key = request_key(request)
        require_workflow(key, body["workflow"])
        if body.get("recipients") is not None:
            people = trigger_create_for_recipients(
                workflow=body["workflow"],
                idempotency_key=body["idempotency_key"],
                payload=body["payload"],
                recipients=body["recipients"],
                actor=actor(key),
                api_key=key,
            )
            return _answer(PeopleTriggerOutputSerializer(people).data, people.created)
        result = trigger_create(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            payload=body["payload"],
            actor=actor(key),
            api_key=key,
        )
        return _answer(TriggerOutputSerializer(result.instance).data, result.created)

    def get_serializer_class(self):
        if self.request is not None and self.request.method == "GET":
            return TriggerSummarySerializer
        return TriggerOutputSerializer

    @extend_schema(
        parameters=[TriggerListFilterSerializer],
        responses=TriggerOutputSerializer(many=True),
        description="Trigger instances, newest first; `recipient` finds those with a "
        "delivery to an email address or phone number.",
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def list(self, request: Request) -> Response:
        # Pages carry no payloads unless asked for (?include_payload=true, a lookup that
        # defers the column otherwise): 50 rows of 256 KiB payloads would be 12 MiB.
        return paginated_list(self, self.get_queryset(), self.filter_lookups)


def _answer(data: dict, created: bool) -> Response:
    if created:
        return Response(data, status=status.HTTP_201_CREATED)
    return Response(data, status=status.HTTP_200_OK, headers={"Idempotent-Replayed": "true"})


class TriggerBulkCreateView(ApiView):
    """Create or replay up to 1,000 triggers in one request: 200 with one
    result per item; 400 only for a malformed envelope or too many items."""

    serializer_class = TriggerBulkOutputSerializer
    # Values are checked per item (BulkItemsField), so one bad item rejects nothing else.
    parser_classes = [PartsCheckedJSONParser]
    required_scope = {"POST": "trigger"}
    body_limit = "NOTIFYFLOW_MAX_BULK_BODY_BYTES"

    @extend_schema(
        request=TriggerBulkInputSerializer,
        responses={200: TriggerBulkOutputSerializer},
        operation_id="v1_triggers_bulk_create",
        description="Each item as its own POST /api/v1/triggers/: `created`, `duplicate` "
        "(with the existing id), or `invalid` with that POST's error - "
        "`idempotency_conflict` (no id) for a repeat of an instance this API key may not "
        "read.",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, TriggerBulkInputSerializer)
        key = request_key(request)
        items = [
            item
            if isinstance(item, ApplicationError) or key.allows_workflow(item.workflow)
            else _workflow_refused(item.workflow)
            for item in body["items"]
        ]
        outcomes = trigger_create_bulk(items=items, actor=actor(key), api_key=key)
        return Response(TriggerBulkOutputSerializer(outcomes).data)


def _workflow_refused(workflow: str) -> ApplicationError:
    """A bulk item for a workflow the key may not use: that item is refused (403's code),
    the others go on."""
    return ApplicationError(
        code="permission_denied",
        field="workflow",
        status=403,
        message=f"workflow: API key may not use workflow {workflow!r}",
    )


class TriggerDetailView(ApiView):
    serializer_class = TriggerOutputSerializer
    lookup_field = "id"
    required_scope = {"GET": "read_own"}

    def get_queryset(self):
        return visible_instances(
            TriggerInstance.objects.select_related("workflow", "workflow_version"),
            request_key(self.request),
        )

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH)])
    def get(self, request: Request, id: UUID) -> Response:
        return Response(self.get_serializer(self.get_object()).data)


class TriggerCancelView(ApiView):
    """Cancel one instance: 200 with the instance, 409 already_finished."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=CancelInputSerializer, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: UUID) -> Response:
        body = validated_body(request, CancelInputSerializer)
        key = request_key(request)
        require_visible_instance(key, id)
        instance = instance_cancel(instance_id=id, actor=actor(key), reason=body["reason"])
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRetryView(ApiView):
    """Retry a failed instance, as the admin's retry: 200 with the instance,
    404 unknown, 409 ``not_failed``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: UUID) -> Response:
        no_body(request)
        key = request_key(request)
        require_visible_instance(key, id)
        instance = instance_retry(instance_id=id, actor=actor(key))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRunNowView(ApiView):
    """Skip the delay or backoff an enqueued instance waits on, as the admin's
    run now: 200 with the instance, 404 unknown, 409 ``not_waiting``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: UUID) -> Response:
        no_body(request)
        key = request_key(request)
        require_visible_instance(key, id)
        instance = instance_run_now(instance_id=id, actor=actor(key))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerCancelByKeyView(ApiView):
    """Cancel the instance of (workflow, idempotency_key), as Knock and Novu do by key."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(
        request=CancelByKeyInputSerializer,
        responses={200: _CANCELLED_BY_KEY},
        operation_id="v1_triggers_cancel_by_key",
        description="The instance of the key; for a trigger that named recipients, its "
        "running fan-out and every unfinished instance of the key (`cancelled`, "
        "`already_finished`, `fanout`).",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, CancelByKeyInputSerializer)
        key = request_key(request)
        require_workflow(key, body["workflow"])
        found = instance_cancel_by_key(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            actor=actor(key),
            reason=body["reason"],
        )
        if isinstance(found, KeyCancelResult):
            return Response(KeyCancelOutputSerializer(found).data)
        return Response(TriggerOutputSerializer(found).data)


class FanOutDetailView(ApiView):
    """A list fan-out's progress: `{id, status, expected, created, duplicates, ...}`."""

    serializer_class = FanOutOutputSerializer
    required_scope = {"GET": "read_own"}

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH)])
    def get(self, request: Request, id: UUID) -> Response:
        fanout = FanOut.objects.select_related("workflow").filter(pk=id).first()
        key = request_key(request)
        if fanout is None or not key.may_read(
            workflow_key=fanout.workflow.key, created_by_key=fanout.created_by_key
        ):
            raise NotFoundError(code="not_found", field=None, message="no such fan-out")
        return Response(FanOutOutputSerializer(fanout).data)


class InstanceEventView(ApiView):
    """Deliver an event to one running instance's inbox."""

    serializer_class = InstanceEventOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(
        request=InstanceEventInputSerializer, responses={202: InstanceEventOutputSerializer}
    )
    def post(self, request: Request, id: UUID) -> Response:
        body = validated_body(request, InstanceEventInputSerializer)
        require_visible_instance(request_key(request), id)
        delivered = deliver_to_instance(
            instance_id=id, name=body["name"], event_id=body["event_id"], context=body["context"]
        )
        return Response({"delivered": delivered.count}, status=status.HTTP_202_ACCEPTED)


class TriggerStepsView(ApiView):
    """Step logs of one trigger instance, oldest first."""

    serializer_class = StepLogOutputSerializer
    pagination_class = StepLogsOldestFirst
    required_scope = {"GET": "read_own"}

    @extend_schema(responses=StepLogOutputSerializer(many=True))
    def get(self, request: Request, id: UUID) -> Response:
        require_visible_instance(request_key(request), id)
        queryset = StepExecutionLog.objects.filter(trigger_id=id).select_related("workflow")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class TriggerTimelineView(ApiView):
    """Where an instance is, what happened and what it waits for: its status
    history (creation included), step logs, inbox and pending work; 404 unknown."""

    serializer_class = TimelineOutputSerializer
    required_scope = {"GET": "read_own"}

    def get(self, request: Request, id: UUID) -> Response:
        require_visible_instance(request_key(request), id, only_if_restricted=True)
        return Response(self.get_serializer(instance_timeline(instance_id=id)).data)


class TriggerDeliveriesView(ApiView):
    """Deliveries of one trigger instance (one per sending node), oldest first, each
    with its provider attempts and status events."""

    serializer_class = DeliveryOutputSerializer
    pagination_class = ByIdOldestFirst
    required_scope = {"GET": "read_own"}

    @extend_schema(responses=DeliveryOutputSerializer(many=True))
    def get(self, request: Request, id: UUID) -> Response:
        require_visible_instance(request_key(request), id)
        queryset = Delivery.objects.filter(instance_id=id).prefetch_related(
            "attempt_rows", "events"
        )
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
