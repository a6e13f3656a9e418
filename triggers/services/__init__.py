"""Writes for trigger instances. Every way in (API, events, admin) calls these.

Input has been validated at the edge (DRF serializers, admin forms); these take typed
arguments and raise ``ApplicationError`` for what only the domain can decide (an unknown
or inactive workflow, a finished instance).

One module per concern: ``creation`` (one instance), ``bulk`` (many in one request),
``operator`` (retry, run now, cancel, pause), ``people`` (a trigger naming recipients),
``test_sends`` (a console or API test send).
"""

from .bulk import MAX_BULK_ITEMS, BulkOutcome, TriggerItem, trigger_create_bulk
from .creation import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    TriggerCreateResult,
    trigger_create,
    workflows_by_key,
)
from .operator import (
    KeyCancelResult,
    instance_cancel,
    instance_cancel_by_key,
    instance_edit_payload_and_retry,
    instance_retry,
    instance_retry_on_latest_version,
    instance_run_now,
    workflow_pause,
    workflow_resume,
)
from .people import (
    MAX_RECIPIENTS,
    PeopleTriggerResult,
    RecipientEntry,
    RecipientInstance,
    trigger_create_for_recipients,
)
from .test_sends import workflow_test_send

__all__ = [
    "MAX_RECIPIENTS",
    "KeyCancelResult",
    "PeopleTriggerResult",
    "RecipientEntry",
    "RecipientInstance",
    "trigger_create_for_recipients",
    "MAX_BULK_ITEMS",
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    "BulkOutcome",
    "TriggerCreateResult",
    "TriggerItem",
    "instance_cancel",
    "instance_cancel_by_key",
    "instance_edit_payload_and_retry",
    "instance_retry",
    "instance_retry_on_latest_version",
    "instance_run_now",
    "trigger_create",
    "trigger_create_bulk",
    "workflow_pause",
    "workflow_resume",
    "workflow_test_send",
    "workflows_by_key",
]
