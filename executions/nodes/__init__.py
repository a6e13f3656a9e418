"""Node executors, one module per node type, looked up through EXECUTORS."""

from __future__ import annotations

from collections.abc import Callable

from ..step import NodeResult, StepContext
from . import batch as batch_node  # gates (SPEC §13)
from . import delay, email, emit, in_app, sms, throttle, wait, webhook

EXECUTORS: dict[str, Callable[[StepContext], NodeResult]] = {
    "email": email.execute,
    "sms": sms.execute,
    "delay": delay.execute,
    "wait": wait.execute,
    "emit": emit.execute,
    "webhook": webhook.execute,
    "throttle": throttle.execute,
    # Gates (SPEC §13).
    "batch": batch_node.execute,
    # The in-app feed (SPEC §14).
    "in_app": in_app.execute,
}

__all__ = ["EXECUTORS", "NodeResult", "StepContext"]
