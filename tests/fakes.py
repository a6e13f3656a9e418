"""Controllable fake providers (the only things faked: what is outside the machine)."""

from __future__ import annotations

import uuid

from executions.providers.base import ProviderError
from executions.providers.sms import BaseSmsBackend, SmsMessage, SmsSendResult


class ScriptedSmsBackend(BaseSmsBackend):
    """Plays ``script`` in order: "ok", "transient" or "permanent"; then "ok" forever."""

    script: list[str] = []
    sent: list[SmsMessage] = []
    calls = 0

    @classmethod
    def reset(cls, *script: str) -> None:
        cls.script, cls.sent, cls.calls = list(script), [], 0

    def send(self, message: SmsMessage) -> SmsSendResult:
        cls = type(self)
        cls.calls += 1
        outcome = cls.script.pop(0) if cls.script else "ok"
        if outcome == "transient":
            raise ProviderError("provider 503: try later", permanent=False)
        if outcome == "permanent":
            raise ProviderError("provider 400: invalid 'To' number", permanent=True)
        cls.sent.append(message)
        return SmsSendResult(f"scripted-{uuid.uuid4()}")


class SlowFileSmsBackend(BaseSmsBackend):
    """The file backend with a provider that takes a while (0.15 s, or
    NOTIFYFLOW_TEST_SMS_DELAY_S): widens the window in which a kill -9 lands mid-step."""

    def send(self, message: SmsMessage) -> SmsSendResult:
        import os
        import time

        from executions.providers.sms import FileSmsBackend

        time.sleep(float(os.environ.get("NOTIFYFLOW_TEST_SMS_DELAY_S", "0.15")))
        return FileSmsBackend().send(message)
