from __future__ import annotations

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .models import RefTrigger


class RefTriggerView(APIView):
    """The reference for POST /api/v1/triggers/: same DRF stack (auth, parser, renderer),
    and the view does only ``get_or_create`` on a table of the same shape."""

    def post(self, request: Request) -> Response:
        body = request.data
        obj, created = RefTrigger.objects.get_or_create(
            workflow_key=body.get("workflow", ""),
            idempotency_key=body["idempotency_key"],
            defaults={"payload": body.get("payload", {})},
        )
        data = {
            "id": str(obj.id),
            "workflow": obj.workflow_key,
            "idempotency_key": obj.idempotency_key,
            "status": obj.status,
            "payload": obj.payload,
            "created_at": obj.created_at.isoformat(),
        }
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RefBulkView(APIView):
    """The reference for POST /api/v1/triggers/bulk/: same DRF stack, and the view does
    only one ``bulk_create(ignore_conflicts=True)`` of the items on the same-shape table
    (no validation per item, no audit or interest rows, no publish): the floor."""

    def post(self, request: Request) -> Response:
        items = request.data["items"]
        RefTrigger.objects.bulk_create(
            [
                RefTrigger(
                    workflow_key=item.get("workflow", ""),
                    idempotency_key=item["idempotency_key"],
                    payload=item.get("payload", {}),
                )
                for item in items
            ],
            ignore_conflicts=True,
        )
        return Response({"results": [{"index": i} for i in range(len(items))]})


class RefConstantView(APIView):
    """The reference for GET /api/v1/feed/counts/: the same DRF stack (renderer,
    content negotiation), no authentication, no throttle, no query - a constant body.
    The floor of any DRF GET on this machine."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []

    def get(self, request: Request) -> Response:
        return Response({"unread_count": 3, "unseen_count": 5})
