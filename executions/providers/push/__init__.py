"""Push providers: FCM (``fcm``), APNs (``apns``) and Web Push (``webpush``).

A push node renders one ``PushMessage`` and calls ``send_push`` once per device of the
person; each call returns a ``TargetResult`` (``executions.providers.targets``:
accepted, dead, retry or failed) and never raises for what the provider answered. Each
provider keeps one client per worker process (``executions.providers.connections``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..targets import TargetOutcome, TargetResult, counted
from . import apns, fcm, webpush
from .message import PushMessage

PROVIDERS = ("fcm", "apns", "webpush")


def send_push(
    *, provider: str, token: str | Mapping[str, Any], message: PushMessage
) -> TargetResult:
    """Send ``message`` to one device: ``token`` is the FCM registration token, the APNs
    device token, or the Web Push subscription (``{endpoint, keys: {p256dh, auth}}``,
    or its JSON)."""
    if provider == "webpush":
        return webpush.send(subscription=token, message=message)
    senders: dict[str, Callable[..., TargetResult]] = {"fcm": fcm.send, "apns": apns.send}
    sender = senders.get(provider)
    if sender is None:
        return TargetResult(TargetOutcome.FAILED, provider, code="unknown_provider")
    if not isinstance(token, str) or not token:
        return counted(TargetResult(TargetOutcome.FAILED, provider, code="invalid_token"))
    return sender(token=token, message=message)


__all__ = ["PROVIDERS", "PushMessage", "send_push"]
