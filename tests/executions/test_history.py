"""An instance's status history: the routine claim and release of a step
write no audit row, yet the history lists every change, merged from the audit rows and
the step logs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine, sweeper
from executions.history import AUDIT, STEP_LOG
from executions.outcomes import StepOutcome
from executions.selectors import instance_status_history
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition
from tests.fakes import ScriptedSmsBackend
from triggers import services
from triggers.models import TriggerInstance, TriggerStatusChange
from triggers.services import trigger_create

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


@pytest.fixture
def scripted(settings):
    settings.SMS_BACKEND = "tests.fakes.ScriptedSmsBackend"
    return ScriptedSmsBackend


def _moves(instance):
    return [
        (c.from_status, c.to_status, c.source) for c in instance_status_history(instance=instance)
    ]


def test_a_routine_step_writes_no_audit_row_and_the_history_still_lists_it(dispatched):
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h1", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=instance.pk, worker="w1") == StepOutcome.ADVANCED
    # Creation is the only audit row so far: the claim and the release are the step log's.
    assert list(TriggerStatusChange.objects.filter(instance=instance).values_list("reason")) == [
        ("created",)
    ]
    assert engine.step_execute(instance_id=instance.pk, worker="w2") == StepOutcome.COMPLETED
    instance.refresh_from_db()

    history = instance_status_history(instance=instance)
    assert [(c.from_status, c.to_status, c.source) for c in history] == [
        ("", "enqueued", AUDIT),
        ("enqueued", "processing", STEP_LOG),
        ("processing", "enqueued", STEP_LOG),
        ("enqueued", "processing", STEP_LOG),
        ("processing", "completed", AUDIT),
    ]
    assert [c.at for c in history] == sorted(c.at for c in history)
    claim, release, second_claim = history[1], history[2], history[3]
    assert (claim.actor, claim.reason) == ("w1", "claimed")
    assert (release.actor, release.reason) == ("engine", "node hello done; next text")
    assert second_claim.actor == "w2"


def test_retries_and_parks_keep_their_audit_rows(dispatched, scripted):
    scripted.reset("transient")
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h2", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    audited = TriggerStatusChange.objects.filter(instance=instance).values_list("reason", flat=True)
    assert [reason.split(":")[0] for reason in audited] == ["created", "retry 1 scheduled"]
    assert _moves(instance) == [
        ("", "enqueued", AUDIT),
        ("enqueued", "processing", STEP_LOG),
        ("processing", "enqueued", STEP_LOG),
        ("enqueued", "processing", STEP_LOG),
        ("processing", "enqueued", AUDIT),
    ]


def test_a_running_step_shows_its_claim_from_the_lease(dispatched):
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h3", payload=PAYLOAD).instance
    claimed = engine.claim(instance_id=instance.pk, worker="busy@host")
    assert claimed is not None
    history = instance_status_history(instance=claimed.instance)
    assert [(c.from_status, c.to_status) for c in history] == [
        ("", "enqueued"),
        ("enqueued", "processing"),
    ]
    assert history[-1].actor == "busy@host"
    assert history[0].at <= history[-1].at <= timezone.now()


def test_a_lost_worker_s_claim_and_its_recovery_are_listed(dispatched):
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h4", payload=PAYLOAD).instance
    claimed = engine.claim(instance_id=instance.pk, worker="doomed@host")
    assert claimed is not None and claimed.instance.locked_until is not None
    assert sweeper.sweep(now=claimed.instance.locked_until + timedelta(seconds=1))["recovered"]
    history = instance_status_history(instance=TriggerInstance.objects.get(pk=instance.pk))
    assert [(c.from_status, c.to_status, c.actor) for c in history] == [
        ("", "enqueued", "api"),
        ("enqueued", "processing", "doomed@host"),
        ("processing", "enqueued", "sweeper"),
    ]
    assert "lease recovered" in history[-1].reason


def test_a_step_cancelled_while_it_ran_ends_with_the_cancellation(dispatched, monkeypatch):
    from workflows.definition import node_types

    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h5", payload=PAYLOAD).instance
    real_email = node_types.get("email").run

    def cancelled_meanwhile(step):
        services.instance_cancel(instance_id=instance.pk, actor="ops", reason="stop")
        return real_email(step)

    monkeypatch.setattr(node_types.get("email"), "run", cancelled_meanwhile)
    engine.step_execute(instance_id=instance.pk)
    assert _moves(instance) == [
        ("", "enqueued", AUDIT),
        ("enqueued", "processing", STEP_LOG),
        ("processing", "cancelled", AUDIT),
    ]


def test_history_written_with_audited_claims_merges_without_duplicates(dispatched, monkeypatch):
    """Instances that ran before the change have an audit row for every claim and
    release: their step logs add nothing."""
    wf = WorkflowFactory(definition=email_sms_definition())
    instance = trigger_create(workflow=wf, idempotency_key="h6", payload=PAYLOAD).instance
    assert engine.step_execute(instance_id=instance.pk, worker="w1") == StepOutcome.ADVANCED
    log = instance.step_logs.get()
    for from_status, to_status, at in (
        ("enqueued", "processing", log.started_at - timedelta(milliseconds=1)),
        ("processing", "enqueued", log.finished_at + timedelta(milliseconds=1)),
    ):
        # Audit rows are immutable: stamped with the old time as they are written.
        with monkeypatch.context() as patch:
            patch.setattr(timezone, "now", lambda at=at: at)
            TriggerStatusChange.objects.create(
                instance=instance, from_status=from_status, to_status=to_status, reason="old"
            )
    assert _moves(instance) == [
        ("", "enqueued", AUDIT),
        ("enqueued", "processing", AUDIT),
        ("processing", "enqueued", AUDIT),
    ]
