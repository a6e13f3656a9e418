"""Node executors, one module per node type, looked up through EXECUTORS."""

from __future__ import annotations

from collections.abc import Callable

from ..step import NodeResult, StepContext
from . import delay, email, emit, sms, throttle, wait, webhook

EXECUTORS: dict[str, Callable[[StepContext], NodeResult]] = {
    "email": email.execute,
    "sms": sms.execute,
    "delay": delay.execute,
    "wait": wait.execute,
    "emit": emit.execute,
    "webhook": webhook.execute,
    "throttle": throttle.execute,
}

__all__ = ["EXECUTORS", "NodeResult", "StepContext"]
