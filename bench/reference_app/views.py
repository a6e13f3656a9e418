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
