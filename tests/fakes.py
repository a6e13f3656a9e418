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


class BackendKillingSmsBackend(BaseSmsBackend):
    """Sends (into the locmem outbox), and meanwhile the database server terminates this
    process's connection, as a failover or ``pg_terminate_backend`` would: the step's
    outcome then meets a dead connection."""

    def send(self, message: SmsMessage) -> SmsSendResult:
        from django.db import connection

        from executions.providers.sms import LocmemSmsBackend

        terminate_backend(connection)
        return LocmemSmsBackend().send(message)


def terminate_backend(connection) -> None:
    """``pg_terminate_backend`` of a Django connection's server process, from another
    connection (only that one backend: the test database's own)."""
    import psycopg

    pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or "postgres",
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))


def email_node_stalling_past_its_lease(monkeypatch, instance) -> None:
    """Make the email node a zombie's: while it "sends", ``instance``'s lease expires and
    the sweeper recovers it, then the real send runs. ``monkeypatch.undo()`` or a new
    ``setitem`` restores the real node."""
    from datetime import timedelta

    from django.utils import timezone

    from executions import sweeper
    from triggers.models import TriggerInstance
    from workflows.definition import node_types

    real_email = node_types.get("email").run

    def stalled(step):
        TriggerInstance.objects.filter(pk=instance.pk).update(
            locked_until=timezone.now() - timedelta(seconds=1)
        )
        sweeper.sweep()
        return real_email(step)

    monkeypatch.setattr(node_types.get("email"), "run", stalled)
