"""HTTP layer of events and workflow triggers; the logic is in ``triggers.events``."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import ApiView, paginated_list, validated_body
from notifyflow.pagination import ByIdOldestFirst

from .event_models import WorkflowTrigger
from .event_serializers import (
    EventInputSerializer,
    EventOutputSerializer,
    EventRecordSerializer,
    InstanceEventInputSerializer,
    InstanceEventOutputSerializer,
    PreviewKeyInputSerializer,
    PreviewKeyOutputSerializer,
    WorkflowTriggerFilterSerializer,
    WorkflowTriggerInputSerializer,
    WorkflowTriggerOutputSerializer,
)
from .events import (
    event_receive,
    idempotency_key_preview,
    workflow_trigger_delete,
    workflow_trigger_save,
)
from .inbox import deliver_to_instance
from .models import ApiKey, TriggerInstance
from .permissions import (
    actor,
    is_restricted,
    require_visible_instance,
    require_workflow,
    visible_instances,
    visible_workflows,
)


class EventReceiveView(ApiView):
    serializer_class = EventOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(request=EventInputSerializer, responses={202: EventOutputSerializer})
    def post(self, request: Request) -> Response:
        body = validated_body(request, EventInputSerializer)
        key = request.user
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


class InstanceEventView(ApiView):
    """Deliver an event to one running instance's inbox."""

    serializer_class = InstanceEventOutputSerializer
    required_scope = {"POST": "trigger"}

    @extend_schema(
        request=InstanceEventInputSerializer, responses={202: InstanceEventOutputSerializer}
    )
    def post(self, request: Request, id: str) -> Response:
        body = validated_body(request, InstanceEventInputSerializer)
        require_visible_instance(request.user, id)
        delivered = deliver_to_instance(
            instance_id=id, name=body["name"], event_id=body["event_id"], context=body["context"]
        )
        return Response({"delivered": delivered.count}, status=status.HTTP_202_ACCEPTED)


def _save_kwargs(request: Request) -> dict:
    body = validated_body(request, WorkflowTriggerInputSerializer)
    require_workflow(request.user, body["workflow"])
    return {
        "event_name": body["event_name"],
        "workflow": body["workflow"],
        "is_active": body["is_active"],
        "idempotency_setting": body.get("idempotency_setting"),
    }


class WorkflowTriggerListCreateView(ApiView):
    serializer_class = WorkflowTriggerOutputSerializer
    pagination_class = ByIdOldestFirst
    query_serializer_class = WorkflowTriggerFilterSerializer

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            self.request.user,
            field="workflow__key",
        )

    @extend_schema(
        parameters=[WorkflowTriggerFilterSerializer],
        responses=WorkflowTriggerOutputSerializer(many=True),
        operation_id="v1_workflow_triggers_list",
    )
    def get(self, request: Request) -> Response:
        return paginated_list(
            self,
            self.get_queryset(),
            {"event_name": "event_name", "workflow": "workflow__key"},
        )

    @extend_schema(
        request=WorkflowTriggerInputSerializer, responses={201: WorkflowTriggerOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        binding = workflow_trigger_save(**_save_kwargs(request))
        return Response(self.get_serializer(binding).data, status=status.HTTP_201_CREATED)


class WorkflowTriggerDetailView(ApiView):
    serializer_class = WorkflowTriggerOutputSerializer
    lookup_field = "id"

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            self.request.user,
            field="workflow__key",
        )

    def get(self, request: Request, id: int) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=WorkflowTriggerInputSerializer)
    def put(self, request: Request, id: int) -> Response:
        binding = self.get_object()
        binding = workflow_trigger_save(binding=binding, **_save_kwargs(request))
        return Response(self.get_serializer(binding).data)

    def delete(self, request: Request, id: int) -> Response:
        workflow_trigger_delete(binding=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkflowTriggerPreviewKeyView(ApiView):
    serializer_class = PreviewKeyOutputSerializer
    lookup_field = "id"
    # Writes nothing: a read.
    required_scope = {"POST": "read"}

    def get_queryset(self) -> QuerySet[WorkflowTrigger]:
        return visible_workflows(
            WorkflowTrigger.objects.select_related("workflow"),
            self.request.user,
            field="workflow__key",
        )

    @extend_schema(request=PreviewKeyInputSerializer, responses={200: PreviewKeyOutputSerializer})
    def post(self, request: Request, id: int) -> Response:
        binding = self.get_object()
        body = validated_body(request, PreviewKeyInputSerializer)
        preview = idempotency_key_preview(
            binding=binding, context=body["context"], event_id=body["event_id"], at=body["at"]
        )
        return Response(
            {
                "idempotency_key": preview.idempotency_key,
                "strategy": preview.strategy,
                "random": preview.random,
                "note": preview.note,
            }
        )
