"""Trigger instances: create (one or in bulk), read, act on, and their history
(timeline, deliveries); the events sent to one instance."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.errors import error_body, validation_error
from api.fields import (
    InputSerializer,
    JsonObjectField,
    KeyField,
    QueryBooleanField,
    QuerySerializer,
    StrictCharField,
)
from executions.models import Delivery, DeliveryAttempt, DeliveryEvent
from notifyflow.errors import ApplicationError
from notifyflow.redaction import redact
from notifyflow.text import check_storable, dumped_storable, printable
from triggers.events import MAX_EVENT_ID_LENGTH, MAX_EVENT_NAME_LENGTH
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import (
    MAX_BULK_ITEMS,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    BulkOutcome,
    TriggerItem,
)
from workflows.models import Workflow

from .items import ItemErrorSerializer
from .step_logs import StepLogOutputSerializer
from .trigger_recipients import (
    FanOutSummarySerializer,
    PeopleTriggerOutputSerializer,
    RecipientInstanceSerializer,
    RecipientsField,
)

WORKFLOW_KEY_MAX_LENGTH = 100


class TriggerCreateInputSerializer(InputSerializer):
    """The body of POST /api/v1/triggers/."""

    stateless_validation = True  # api.base.validated_body

    workflow = KeyField(max_length=WORKFLOW_KEY_MAX_LENGTH, help_text="Workflow key")
    idempotency_key = KeyField(max_length=MAX_IDEMPOTENCY_KEY_LENGTH)
    payload = JsonObjectField(help_text="Any JSON object; templates see it as `payload`")
    recipients = RecipientsField(
        required=False,
        help_text="Optional: one instance per distinct recipient, all under "
        "`idempotency_key`. Each entry a recipient id (created empty if unknown), an inline "
        "recipient (upserted in the same transaction) or `{list: key}` (expanded by a "
        "fan-out job). The answer is then `{workflow, idempotency_key, instances, fanout?}`.",
    )


@extend_schema_field(
    {
        "type": "array",
        "maxItems": MAX_BULK_ITEMS,
        # Any item is accepted into the batch: one that is not a TriggerCreateInput is
        # answered `invalid` in its result, never a 400 for the request.
        "items": {"anyOf": [{"$ref": "#/components/schemas/TriggerCreateInput"}, {}]},
    }
)
class BulkItemsField(serializers.ListField):
    """The ``items`` of a bulk request: a list of at most MAX_BULK_ITEMS trigger bodies.

    Only the list is the envelope (``not_a_list``, ``too_many_items``: 400 for the whole
    request). Each item is checked on its own, exactly as the single POST checks its
    body (storable JSON values, then TriggerCreateInputSerializer): a valid item becomes
    a ``TriggerItem``, a bad one the ApplicationError that POST would have answered."""

    default_error_messages = {
        "not_a_list": "must be a list of trigger objects",
        "too_many_items": "at most {max_length} items per request, got {count}",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=TriggerCreateInputSerializer(), max_length=MAX_BULK_ITEMS, **kwargs)

    def to_internal_value(self, data: Any) -> list[TriggerItem | ApplicationError]:
        if not isinstance(data, list):
            self.fail("not_a_list")
        if len(data) > MAX_BULK_ITEMS:
            self.fail("too_many_items", max_length=MAX_BULK_ITEMS, count=len(data))
        plain = _PlainItem(
            workflow_max=WORKFLOW_KEY_MAX_LENGTH,
            key_max=MAX_IDEMPOTENCY_KEY_LENGTH,
            payload_max=settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES,
        )
        return [plain.item(raw) or self._item(raw) for raw in data]

    def _item(self, raw: Any) -> TriggerItem | ApplicationError:
        if not isinstance(raw, dict):
            return ApplicationError(
                code="not_an_object", field="body", message="body: must be a JSON object"
            )
        try:
            check_storable(raw)
            data = self.child.run_validation(raw)
        except ApplicationError as exc:
            return exc
        except serializers.ValidationError as exc:
            return validation_error(exc)
        return TriggerItem(
            workflow=data["workflow"],
            idempotency_key=data["idempotency_key"],
            payload=data["payload"],
            recipients=data.get("recipients"),
        )


_PLAIN_KEYS = frozenset({"workflow", "idempotency_key", "payload"})


class _PlainItem:
    """The lean check of a bulk item: the ``TriggerItem`` that ``BulkItemsField._item``
    (storable values, then TriggerCreateInputSerializer) makes of an item of the plain
    shape - exactly ``workflow``, ``idempotency_key`` and ``payload``, two non-blank
    printable strings (``KeyField``) within their lengths and an object within the
    payload limit, nothing ``check_storable`` refuses - or None for anything else, which
    then takes that path and gets its error from it. A serializer run per item was
    ~20 ms of a 1,000-item request (bench/RESULTS.md, issue 29).
    tests/api/test_bulk_items.py compares the two on valid and invalid items."""

    def __init__(self, *, workflow_max: int, key_max: int, payload_max: int) -> None:
        self.workflow_max, self.key_max, self.payload_max = workflow_max, key_max, payload_max

    def item(self, raw: Any) -> TriggerItem | None:
        if type(raw) is not dict or raw.keys() != _PLAIN_KEYS:
            return None
        workflow, key, payload = raw["workflow"], raw["idempotency_key"], raw["payload"]
        if (
            type(workflow) is not str
            or type(key) is not str
            or type(payload) is not dict
            or not 0 < len(workflow) <= self.workflow_max
            or not 0 < len(key) <= self.key_max
            or not workflow.strip()
            or not key.strip()
            or not printable(workflow)
            or not printable(key)
        ):
            return None
        # As JsonObjectField measures it (ensure_ascii: characters are bytes).
        dumped = json.dumps(payload, separators=(",", ":"))
        if len(dumped) > self.payload_max or not dumped_storable(dumped):
            return None
        return TriggerItem(workflow=workflow, idempotency_key=key, payload=payload)


class TriggerBulkInputSerializer(InputSerializer):
    """The body of POST /api/v1/triggers/bulk/."""

    stateless_validation = True  # api.base.validated_body

    items = BulkItemsField(
        help_text=f"At most {MAX_BULK_ITEMS} triggers, each as the body of POST "
        "/api/v1/triggers/; each is created, replayed or refused on its own (an item "
        "that is not a valid trigger is answered `invalid` in `results`)"
    )

    def to_internal_value(self, data: Any) -> Any:
        # The parser checks values per item (BulkItemsField); the envelope's own keys and
        # values are checked here, before an unknown key is named in an error.
        if isinstance(data, dict):
            check_storable({key: value for key, value in data.items() if key != "items"})
        return super().to_internal_value(data)


class BulkResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Position of the item in `items`")
    status = serializers.ChoiceField(choices=["created", "duplicate", "invalid"])
    id = serializers.UUIDField(required=False, help_text="The instance (created or duplicate)")
    error = ItemErrorSerializer(required=False, help_text="Why the item is invalid")
    instances = RecipientInstanceSerializer(
        many=True, required=False, help_text="An item naming recipients: one per recipient"
    )
    fanout = FanOutSummarySerializer(required=False, help_text="Its lists' fan-out")


class TriggerBulkOutputSerializer(serializers.Serializer):
    results = BulkResultSerializer(many=True)

    def to_representation(self, outcomes: list[BulkOutcome]) -> dict:
        # Built directly (up to 1,000 results): the fields above are the schema.
        results: list[dict[str, Any]] = []
        for index, outcome in enumerate(outcomes):
            result: dict[str, Any] = {"index": index, "status": outcome.status}
            if outcome.instance_id is not None:
                result["id"] = str(outcome.instance_id)
            if outcome.error is not None:
                result["error"] = error_body(outcome.error)
            if outcome.people is not None:
                result.update(PeopleTriggerOutputSerializer(outcome.people).data)
                del result["workflow"], result["idempotency_key"]
            results.append(result)
        return {"results": results}


class CursorSerializer(serializers.Serializer):
    current_node_id = serializers.CharField(allow_null=True)


class TriggerOutputSerializer(serializers.ModelSerializer):
    workflow: serializers.SlugRelatedField[Workflow] = serializers.SlugRelatedField(
        slug_field="key", read_only=True
    )
    workflow_version = serializers.IntegerField(source="workflow_version.version", read_only=True)
    cursor = serializers.SerializerMethodField()
    recipient = serializers.CharField(
        source="recipient_id",
        read_only=True,
        allow_null=True,
        help_text="The recipient's id, if the trigger named recipients (null once erased)",
    )
    test = serializers.BooleanField(
        source="is_test",
        read_only=True,
        help_text="A test send (console or POST /workflows/{key}/test/): left out of stats",
    )

    class Meta:
        model = TriggerInstance
        fields = [
            "id",
            "workflow",
            "workflow_version",
            "idempotency_key",
            "status",
            "cursor",
            "vars",
            "attempts",
            "available_at",
            "payload",
            "last_error",
            "created_at",
            "updated_at",
            "finished_at",
            "recipient",
            "recipient_erased",
            "test",
        ]

    def get_cursor(self, obj: TriggerInstance) -> dict:
        return {"current_node_id": obj.current_node_id}

    get_cursor.__annotations__["return"] = CursorSerializer

    def to_representation(self, obj: TriggerInstance) -> dict:
        # The same fields as declared above (they drive the OpenAPI schema), built
        # directly, since DRF's per-field machinery is a visible share of a POST
        # (bench/RESULTS.md, round 1 "What changed after the first full run").
        # tests/api/test_trigger_representation.py compares the two field by field.
        data = {
            "id": str(obj.pk),
            "workflow": obj.workflow.key,
            "workflow_version": obj.workflow_version.version,
            "idempotency_key": obj.idempotency_key,
            "status": obj.status,
            "cursor": {"current_node_id": obj.current_node_id},
            "vars": obj.vars,
            "attempts": obj.attempts,
            "available_at": _iso(obj.available_at),
            "payload": None,
            "last_error": obj.last_error,
            "created_at": _iso(obj.created_at),
            "updated_at": _iso(obj.updated_at),
            "finished_at": _iso(obj.finished_at),
            "recipient": obj.recipient_id,
            "recipient_erased": obj.recipient_erased,
            "test": obj.is_test,
        }
        if self.with_payload():
            data["payload"] = redact(obj.payload)
        else:
            del data["payload"]  # never read: the list's query defers it
        return data

    def with_payload(self) -> bool:
        return True


def _iso(value: datetime | None) -> str | None:
    """DRF's DateTimeField format (UTC, 'Z')."""
    if value is None:
        return None
    value = timezone.localtime(value, UTC)
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class TriggerSummarySerializer(TriggerOutputSerializer):
    """A list item: the instance without its payload (ask with ``include_payload``)."""

    class Meta(TriggerOutputSerializer.Meta):
        fields = [f for f in TriggerOutputSerializer.Meta.fields if f != "payload"]

    def with_payload(self) -> bool:
        return bool(self.context.get("include_payload"))


class TriggerListFilterSerializer(QuerySerializer):
    include_payload = QueryBooleanField(
        required=False, default=False, help_text="Include each instance's payload"
    )
    workflow = serializers.SlugField(required=False)
    status = serializers.ChoiceField(choices=TriggerStatus.values, required=False)
    idempotency_key = serializers.CharField(required=False, max_length=255)
    recipient = serializers.CharField(
        required=False,
        max_length=320,
        help_text="A recipient id (instances triggered for that person), or an email address "
        "or phone number a delivery of the instance was sent to",
    )


class CancelInputSerializer(InputSerializer):
    reason = StrictCharField(
        max_length=2000,
        required=False,
        default="",
        allow_blank=True,
        help_text="Written into the audit row",
    )


class CancelByKeyInputSerializer(CancelInputSerializer):
    workflow = KeyField(max_length=100, help_text="Workflow key")
    idempotency_key = KeyField(max_length=MAX_IDEMPOTENCY_KEY_LENGTH)


class StatusChangeOutputSerializer(serializers.Serializer):
    """One change of an instance's status history: an audit row, or a step's claim or
    routine release, which its step log records; ``from_status`` is "" for its
    creation."""

    from_status = serializers.ChoiceField(choices=["", *TriggerStatus.values])
    to_status = serializers.ChoiceField(choices=TriggerStatus.values)
    reason = serializers.CharField()
    actor = serializers.CharField()
    at = serializers.DateTimeField()


class InstanceEventInputSerializer(InputSerializer):
    name = StrictCharField(max_length=MAX_EVENT_NAME_LENGTH)
    event_id = KeyField(
        max_length=MAX_EVENT_ID_LENGTH, required=False, allow_null=True, default=None
    )
    # The API's field name; mypy sees it shadow DRF's own ``context``.
    context = JsonObjectField()  # type: ignore[assignment]


class InstanceEventOutputSerializer(serializers.Serializer):
    delivered = serializers.IntegerField()


class WaitingForSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["event", "batch", "throttle", "send_window"])
    event = serializers.CharField(allow_null=True)
    deadline = serializers.DateTimeField(allow_null=True)


class PendingOutputSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    node_type = serializers.CharField()
    due_at = serializers.DateTimeField()
    waiting_for = WaitingForSerializer(allow_null=True)


class InboxItemOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    event_id = serializers.CharField(allow_null=True)
    # The API's field name; mypy sees it shadow DRF's own ``context``.
    context = serializers.DictField()  # type: ignore[assignment]
    received_at = serializers.DateTimeField()
    consumed_at = serializers.DateTimeField(allow_null=True)
    consumed_by_node = serializers.CharField(allow_null=True)


class TimelineOutputSerializer(serializers.Serializer):
    """GET /triggers/{id}/timeline/."""

    instance = TriggerOutputSerializer()
    history = StatusChangeOutputSerializer(many=True)
    steps = StepLogOutputSerializer(many=True)
    inbox = InboxItemOutputSerializer(many=True)
    pending = PendingOutputSerializer(allow_null=True)


class DeliveryAttemptOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = ["attempt", "provider", "outcome", "latency_ms", "error", "message_id", "at"]


class DeliveryEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryEvent
        fields = [
            "provider",
            "provider_event",
            "status",
            "applied",
            "occurred_at",
            "received_at",
            "raw",
        ]


class DeliveryOutputSerializer(serializers.ModelSerializer):
    """A delivery with every provider call (failover) and every status report; a push
    or chat delivery with each device's or connection's result (``targets``)."""

    targets = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="A push or chat delivery: each device's or connection's result by its id, "
        "{provider, target, outcome: accepted|dead|retry|failed, message_id?, code?, "
        "retry_after_s?, detail?, removed?, at}; null for an email or SMS.",
    )

    trigger = serializers.UUIDField(source="instance_id", read_only=True)
    provider_attempts = DeliveryAttemptOutputSerializer(
        source="attempt_rows", many=True, read_only=True
    )
    events = DeliveryEventOutputSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "trigger",
            "node_id",
            "channel",
            "status",
            "tracking_status",
            "tracking_updated_at",
            "provider_message_id",
            "attempts",
            "output",
            "targets",
            "created_at",
            "updated_at",
            "provider_attempts",
            "events",
        ]
