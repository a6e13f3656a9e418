from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from notifyflow.api import ApiView, Lookup, no_body, paginated_list, validated_body
from notifyflow.errors import ApplicationError
from notifyflow.pagination import NewestFirst
from notifyflow.parsers import PartsCheckedJSONParser
from workflows.models import Workflow
from workflows.serializers import WorkflowOutputSerializer

from .models import TriggerInstance
from .permissions import (
    actor,
    require_visible_instance,
    require_workflow,
    visible_instances,
    visible_workflows,
)
from .serializers import (
    CancelByKeyInputSerializer,
    CancelInputSerializer,
    TriggerBulkInputSerializer,
    TriggerBulkOutputSerializer,
    TriggerCreateInputSerializer,
    TriggerListFilterSerializer,
    TriggerOutputSerializer,
    TriggerSummarySerializer,
)
from .services import (
    instance_cancel,
    instance_cancel_by_key,
    instance_retry,
    instance_run_now,
    trigger_create,
    trigger_create_bulk,
    workflow_pause,
    workflow_resume,
)


class TriggerListCreateView(ApiView):
    serializer_class = TriggerOutputSerializer
    pagination_class = NewestFirst
    required_scope = {"POST": "trigger", "GET": "read_own"}
    # Higher layers may add filters (executions: ?recipient=) by subclassing.
    query_serializer_class = TriggerListFilterSerializer
    filter_lookups: dict[str, Lookup] = {
        "workflow": "workflow__key",
        "status": "status",
        "idempotency_key": "idempotency_key",
        "include_payload": lambda queryset, include: (
            queryset if include else queryset.defer("payload")
        ),
    }

    def get_queryset(self):
        return visible_instances(
            TriggerInstance.objects.select_related("workflow", "workflow_version"),
            self.request.user,
        )

    @extend_schema(
        request=TriggerCreateInputSerializer,
        responses={201: TriggerOutputSerializer, 200: TriggerOutputSerializer},
        description="201: a new instance. 200 with `Idempotent-Replayed: true`: a repeat of "
        "(workflow, idempotency_key) - the instance as the first call made it; the repeat's "
        "payload is ignored. 409 `idempotency_conflict`: the key's instance is one this API "
        "key may not read (a `trigger` key reads only what it created); nothing of it is in "
        "the answer.",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, TriggerCreateInputSerializer)
        require_workflow(request.user, body["workflow"])
        result = trigger_create(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            payload=body["payload"],
            actor=actor(request.user),
            api_key=request.user,
        )
        data = TriggerOutputSerializer(result.instance).data
        if result.created:
            return Response(data, status=status.HTTP_201_CREATED)
        return Response(data, status=status.HTTP_200_OK, headers={"Idempotent-Replayed": "true"})

    def get_serializer_class(self):
        if self.request is not None and self.request.method == "GET":
            return TriggerSummarySerializer
        return TriggerOutputSerializer

    @extend_schema(
        parameters=[TriggerListFilterSerializer], responses=TriggerSummarySerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def list(self, request: Request) -> Response:
        # Pages carry no payloads unless asked for (?include_payload=true, a lookup that
        # defers the column otherwise): 50 rows of 256 KiB payloads would be 12 MiB.
        return paginated_list(self, self.get_queryset(), self.filter_lookups)


class TriggerBulkCreateView(ApiView):
    """Create or replay up to 1,000 triggers in one request: 200 with one
    result per item; 400 only for a malformed envelope or too many items."""

    serializer_class = TriggerBulkOutputSerializer
    # Values are checked per item (BulkItemsField), so one bad item rejects nothing else.
    parser_classes = [PartsCheckedJSONParser]
    required_scope = {"POST": "trigger"}

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
        body = validated_body(
            request, TriggerBulkInputSerializer, settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES
        )
        key = request.user
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
            self.request.user,
        )

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH)])
    def get(self, request: Request, id: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)


class TriggerCancelView(ApiView):
    """Cancel one instance: 200 with the instance, 409 already_finished."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=CancelInputSerializer, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        body = validated_body(request, CancelInputSerializer)
        require_visible_instance(request.user, id)
        instance = instance_cancel(instance_id=id, actor=actor(request.user), reason=body["reason"])
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRetryView(ApiView):
    """Retry a failed instance, as the admin's retry: 200 with the instance,
    404 unknown, 409 ``not_failed``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        no_body(request)
        require_visible_instance(request.user, id)
        instance = instance_retry(instance_id=id, actor=actor(request.user))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerRunNowView(ApiView):
    """Skip the delay or backoff an enqueued instance waits on, as the admin's
    run now: 200 with the instance, 404 unknown, 409 ``not_waiting``."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(request=None, responses={200: TriggerOutputSerializer})
    def post(self, request: Request, id: str) -> Response:
        no_body(request)
        require_visible_instance(request.user, id)
        instance = instance_run_now(instance_id=id, actor=actor(request.user))
        return Response(TriggerOutputSerializer(instance).data)


class TriggerCancelByKeyView(ApiView):
    """Cancel the instance of (workflow, idempotency_key), as Knock and Novu do by key."""

    serializer_class = TriggerOutputSerializer

    @extend_schema(
        request=CancelByKeyInputSerializer,
        responses={200: TriggerOutputSerializer},
        operation_id="v1_triggers_cancel_by_key",
    )
    def post(self, request: Request) -> Response:
        body = validated_body(request, CancelByKeyInputSerializer)
        require_workflow(request.user, body["workflow"])
        instance = instance_cancel_by_key(
            workflow=body["workflow"],
            idempotency_key=body["idempotency_key"],
            actor=actor(request.user),
            reason=body["reason"],
        )
        return Response(TriggerOutputSerializer(instance).data)


class WorkflowPauseView(ApiView):
    """Pause (no step starts) or resume (due instances dispatched at once) a workflow."""

    serializer_class = WorkflowOutputSerializer
    lookup_field = "key"
    pause = True

    def get_queryset(self):
        return visible_workflows(
            Workflow.objects.select_related("current_version"), self.request.user
        )

    @extend_schema(request=None, responses={200: WorkflowOutputSerializer})
    def post(self, request: Request, key: str) -> Response:
        no_body(request)
        workflow = self.get_object()
        if self.pause:
            workflow_pause(workflow=workflow, actor=actor(request.user))
        else:
            workflow_resume(workflow=workflow, actor=actor(request.user))
        return Response(self.get_serializer(workflow).data)
