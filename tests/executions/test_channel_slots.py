"""A hung provider stalls nothing but its own channel: every provider call times out by
default, and one channel's sends hold at most all but one of a worker's processes
(executions.channel_slots), so the other channels keep going (issue: SMTP stopped 30 s
made SMS-only instances wait 30.6 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core import mail
from django.utils import timezone

import notifyflow.settings as defaults
from executions import channel_slots, engine
from executions.models import Delivery
from executions.outcomes import StepOutcome
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowFactory
from tests.fake_smtp import FakeSmtpServer
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.models import TriggerInstance, TriggerStatus
from triggers.services import trigger_create

S = TriggerStatus

EMAIL_ONLY = {
    "entry_node_id": "mail",
    "edges": [],
    "nodes": [
        {
            "id": "mail",
            "type": "email",
            "config": {"to": "{{ payload.email }}", "subject": "s", "body": "b"},
        }
    ],
}
SMS_ONLY = {
    "entry_node_id": "text",
    "edges": [],
    "nodes": [{"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "b"}}],
}


@pytest.fixture
def three_process_worker(tmp_path, settings):
    """This process as one of a three-process worker's: two slots per channel."""
    settings.NOTIFYFLOW_CHANNEL_SLOT_WAIT_S = 0.1
    channel_slots.configure(worker=SimpleNamespace(concurrency=3), directory=tmp_path / "slots")
    yield tmp_path / "slots"
    channel_slots.reset()


@pytest.mark.django_db
def test_a_channel_whose_slots_are_all_busy_defers_the_step_without_an_attempt(
    three_process_worker, dispatched
):
    email = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
    text = TriggerInstanceFactory(workflow=WorkflowFactory(definition=SMS_ONLY))
    with ExitStack() as hung:  # two email sends stuck in a provider call
        hung.enter_context(channel_slots.channel_slot("email"))
        hung.enter_context(channel_slots.channel_slot("email"))
        before = timezone.now()
        assert engine.step_execute(instance_id=email.pk) == StepOutcome.FAILED_DEFERRED
        # The other channel still has its slots.
        assert engine.step_execute(instance_id=text.pk) == StepOutcome.COMPLETED
    email.refresh_from_db()
    assert (email.status, email.attempts) == (S.ENQUEUED, 0)
    assert "email send slots" in email.last_error
    assert before + timedelta(seconds=5) <= email.available_at
    assert email.available_at <= timezone.now() + timedelta(seconds=5)
    assert mail.outbox == [] and not Delivery.objects.filter(instance=email).exists()
    # A slot free again: the step sends.
    TriggerInstance.objects.filter(pk=email.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=email.pk) == StepOutcome.COMPLETED
    assert len(mail.outbox) == 1


@pytest.mark.parametrize(
    ("processes", "setting", "slots"), [(1, 0, 0), (2, 0, 1), (4, 0, 3), (1, 2, 2)]
)
def test_slots_per_channel_follow_the_worker_s_processes(settings, processes, setting, slots):
    """All but one process may send on one channel; a one-process worker (never two sends
    in flight) takes no slot unless NOTIFYFLOW_CHANNEL_SLOTS asks for them."""
    settings.NOTIFYFLOW_CHANNEL_SLOTS = setting
    channel_slots.configure(worker=SimpleNamespace(concurrency=processes))
    try:
        assert channel_slots.slots_per_channel() == slots
    finally:
        channel_slots.reset()
    assert channel_slots.slots_per_channel() == 0  # outside a worker


def test_a_solo_pool_worker_takes_no_slot_whatever_its_concurrency(settings):
    """``-P solo`` runs one task at a time; Celery still reports the CPU count as its
    concurrency."""
    from celery.concurrency.prefork import TaskPool as PreforkPool
    from celery.concurrency.solo import TaskPool as SoloPool

    settings.NOTIFYFLOW_CHANNEL_SLOTS = 0
    try:
        channel_slots.configure(worker=SimpleNamespace(concurrency=2, pool_cls=SoloPool))
        assert channel_slots.slots_per_channel() == 0
        channel_slots.configure(worker=SimpleNamespace(concurrency=2, pool_cls=PreforkPool))
        assert channel_slots.slots_per_channel() == 1
    finally:
        channel_slots.reset()


def test_a_slot_held_by_a_killed_process_is_free_again(three_process_worker):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
            str(three_process_worker / "email-0.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with channel_slots.channel_slot("email"):  # the second slot
        with pytest.raises(channel_slots.ChannelBusy):
            with channel_slots.channel_slot("email"):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        with channel_slots.channel_slot("email"):
            pass


def test_every_provider_call_times_out_by_default():
    soft_limit = defaults.NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S
    for timeout in (
        defaults.EMAIL_TIMEOUT,  # SMTP connect and each read
        defaults.ANYMAIL["REQUESTS_TIMEOUT"],  # anymail's HTTP ESPs
        defaults.TWILIO_TIMEOUT_S,
        defaults.NOTIFYFLOW_WEBHOOK_TIMEOUT_S,
    ):
        assert 0 < timeout <= soft_limit / 2


@pytest.mark.django_db
def test_a_hung_smtp_server_fails_the_attempt_transiently_at_the_timeout(settings, dispatched):
    server = FakeSmtpServer("hang")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 1
    try:
        email = TriggerInstanceFactory(workflow=WorkflowFactory(definition=EMAIL_ONLY))
        started = time.monotonic()
        assert engine.step_execute(instance_id=email.pk) == StepOutcome.FAILED_TRANSIENT
        assert time.monotonic() - started < 5
    finally:
        server.close()
    email.refresh_from_db()
    assert (email.status, email.attempts) == (S.ENQUEUED, 1)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_smtp_hung_sms_instances_still_finish_promptly(tmp_path):
    flush_broker()
    server = FakeSmtpServer("hang")
    emails = WorkflowFactory(definition=EMAIL_ONLY)
    texts = WorkflowFactory(definition=SMS_ONLY)
    smtp = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(server.port),
        # The default provider timeouts and send slots, the default retry delays.
        "NOTIFYFLOW_RETRY_BASE_DELAY_S": "60",
    }
    try:
        with celery_worker(tmp_path, pool="prefork", concurrency=3, **smtp):
            for i in range(6):  # the email steps are queued first: they take every process
                trigger_create(workflow=emails.key, idempotency_key=f"e{i}", payload=PAYLOAD)
            sms_ids = [
                trigger_create(
                    workflow=texts.key, idempotency_key=f"s{i}", payload=PAYLOAD
                ).instance.pk
                for i in range(6)
            ]
            wait_until(
                lambda: (
                    TriggerInstance.objects.filter(pk__in=sms_ids, status=S.COMPLETED).count()
                    == len(sms_ids)
                ),
                timeout=60,
                what="the SMS-only instances to complete",
            )
            assert server.connections >= 1  # the email steps did reach the hung server
            server.close()  # lets the stuck sends fail, so the worker stops at once
    finally:
        server.close()
    waited = [
        (instance.finished_at - instance.created_at).total_seconds()
        for instance in TriggerInstance.objects.filter(pk__in=sms_ids)
    ]
    # The email sends hang for EMAIL_TIMEOUT (10 s); the SMS steps do not wait for them.
    assert max(waited) < 6, waited
