"""``POST /workflows/sync/``: the same sync as ``manage.py workflows sync``, over HTTP
(admin scope)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import ApiView, validated_body
from api_keys.authentication import request_key
from workflows.sync import SyncResult, specs_from_documents, workflows_sync

from ..permissions import actor, require_workflow
from ..serializers.workflow_sync import WorkflowSyncInputSerializer, WorkflowSyncOutputSerializer


def _result(result: SyncResult) -> dict[str, object]:
    body: dict[str, object] = {"key": result.key, "status": result.status.value}
    if result.version is not None:
        body["version"] = result.version
    if result.diff:
        body["diff"] = result.diff
    return body


class WorkflowSyncView(ApiView):
    """Create or update every listed workflow that changed (one new version each, with the
    message), leave the others alone, and with prune deactivate those not listed - in one
    transaction. 400 listing every problem of every workflow when any is invalid: then
    nothing is written."""

    serializer_class = WorkflowSyncOutputSerializer
    # A repository's workflows in one body: the bulk endpoints' limit.
    body_limit = "NOTIFYFLOW_MAX_BULK_BODY_BYTES"

    @extend_schema(
        request=WorkflowSyncInputSerializer, responses={200: WorkflowSyncOutputSerializer}
    )
    def post(self, request: Request) -> Response:
        data = validated_body(request, WorkflowSyncInputSerializer)
        specs = specs_from_documents(data["workflows"])
        key = request_key(request)
        for spec in specs:
            require_workflow(key, spec.key)
        results = workflows_sync(
            specs=specs,
            prune=data["prune"],
            dry_run=data["dry_run"],
            message=data["message"],
            actor=actor(key),
            within=key.workflows or None,
        )
        return Response(self.get_serializer({"results": [_result(r) for r in results]}).data)
