"""Batches of batch nodes (docs/api.md#batches): list them, read one with its items, flush one."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, no_body, paginated_list
from api.pagination import MAX_PAGE_SIZE, CursorPagination
from api_keys.authentication import request_key
from gates.batches import batch_items, batch_or_404, batches, flush
from gates.models import Batch
from notifyflow.errors import NotFoundError

from ..permissions import actor, visible_workflows
from ..serializers.batches import (
    BatchDetailOutputSerializer,
    BatchFilterSerializer,
    BatchOutputSerializer,
)

ID_PARAMETER = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Batch id")


class BatchesNewestFirst(CursorPagination):
    """Served by batch_workflow_status, batch_status_opened and batch_recipient."""

    ordering = ("-opened_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


def _visible_batch(request: Request, batch_id: UUID) -> Batch:
    """The batch, or 404 (also for a key limited to other workflows)."""
    batch = batch_or_404(batch_id)
    if not request_key(request).allows_workflow(batch.workflow.key):
        raise NotFoundError(code="not_found", field=None, message="no such batch")
    return batch


class BatchListView(ApiView):
    serializer_class = BatchOutputSerializer
    pagination_class = BatchesNewestFirst
    query_serializer_class = BatchFilterSerializer

    @extend_schema(
        parameters=[BatchFilterSerializer],
        responses=BatchOutputSerializer(many=True),
        description="Batches, newest first, filtered by workflow key, recipient id, status.",
    )
    def get(self, request: Request) -> Response:
        queryset = visible_workflows(batches(), request_key(request), field="workflow__key")
        return paginated_list(
            self,
            queryset,
            {"workflow": "workflow__key", "recipient": "recipient_id", "status": "status"},
        )


class BatchDetailView(ApiView):
    serializer_class = BatchDetailOutputSerializer

    @extend_schema(parameters=[ID_PARAMETER], responses=BatchDetailOutputSerializer)
    def get(self, request: Request, id: UUID) -> Response:
        batch = _visible_batch(request, id)
        items = batch_items(batch_id=batch.pk)
        return Response(BatchDetailOutputSerializer(batch, context={"items": items}).data)


class BatchFlushView(ApiView):
    """Close an open batch now: its members complete and its opener continues with the
    digest. 200 with the batch, 404 unknown, 409 ``not_open``."""

    serializer_class = BatchOutputSerializer

    @extend_schema(parameters=[ID_PARAMETER], request=None, responses=BatchOutputSerializer)
    def post(self, request: Request, id: UUID) -> Response:
        no_body(request)
        batch = _visible_batch(request, id)
        flushed = flush(batch_id=batch.pk, actor=actor(request_key(request)))
        return Response(BatchOutputSerializer(flushed).data)
