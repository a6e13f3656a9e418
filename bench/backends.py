"""Null providers for benchmarks.

Django's locmem email backend and the locmem SMS backend keep every message in a list
for the life of the process: over 100k steps that is a memory leak by design and would
spoil the worker-RSS measurement. These build the message like a real backend would
(MIME serialisation included) and then drop it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

from executions.providers.sms import BaseSmsBackend, SmsMessage, SmsSendResult


class NullEmailBackend(BaseEmailBackend):
    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        count = 0
        for message in email_messages:
            message.message().as_bytes()  # the serialisation a real backend pays for
            count += 1
        return count


class NullSmsBackend(BaseSmsBackend):
    def send(self, message: SmsMessage) -> SmsSendResult:
        return SmsSendResult(f"null-{uuid.uuid4()}")
