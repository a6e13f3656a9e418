"""The triggers app's tables: instances and their status changes (``instances``), event
bindings and event records (``events``), list fan-outs (``fanouts``), an instance's
inbox, interests and outbox (``inbox``)."""

from .events import EventRecord, WorkflowTrigger
from .fanouts import FanOut, FanOutStatus
from .inbox import InboxEvent, Interest, OutboxEvent
from .instances import (
    GATES,
    TERMINAL_STATUSES,
    ParkedOn,
    TriggerInstance,
    TriggerStatus,
    TriggerStatusChange,
    Waiting,
)

__all__ = [
    "GATES",
    "TERMINAL_STATUSES",
    "EventRecord",
    "FanOut",
    "FanOutStatus",
    "InboxEvent",
    "Interest",
    "OutboxEvent",
    "ParkedOn",
    "TriggerInstance",
    "TriggerStatus",
    "TriggerStatusChange",
    "Waiting",
    "WorkflowTrigger",
]
