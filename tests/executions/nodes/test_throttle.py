"""The ``throttle`` node through the engine (``step_execute``): a throttled instance
ends completed with the ``throttled`` skip and runs nothing after it; ``defer`` parks it
until the window has room (the timeline says ``throttle``); run-now releases it; the
recipient scope counts a person across workflows. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.models import SkipReason, StepExecutionLog
from executions.outcomes import StepOutcome
from gates.models import ThrottleCounter
from gates.throttles import epoch_ms
from tests.factories import (
    PAYLOAD,
    RecipientFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
    throttle_definition,
)
from triggers.models import ParkedOn, TriggerInstance, TriggerStatus
from triggers.services import instance_run_now

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def _fresh(instance) -> TriggerInstance:
    return TriggerInstance.objects.get(pk=instance.pk)


def _run_to_the_end(instance) -> list[str]:
    outcomes = []
    for _ in range(10):
        outcome = engine.step_execute(instance_id=instance.pk)
        outcomes.append(outcome)
        if outcome != StepOutcome.ADVANCED:
            break
    return outcomes


def _nodes_run(instance) -> list[str]:
    return list(
        StepExecutionLog.objects.filter(trigger=instance)
        .order_by("started_at", "id")
        .values_list("node_id", flat=True)
    )


def _window_passes() -> None:
    """Every hit so far left the window (as if its hour had passed)."""
    long_ago = epoch_ms(timezone.now() - timedelta(days=2))
    for counter in ThrottleCounter.objects.all():
        counter.hits = [long_ago for _ in counter.hits]
        counter.save(update_fields=["hits"])


def test_within_the_limit_instances_pass_and_go_on(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=2))
    for _ in range(2):
        instance = TriggerInstanceFactory(workflow=workflow)
        assert _run_to_the_end(instance)[-1] == StepOutcome.COMPLETED
        assert _nodes_run(instance) == ["gate", "hello", "text"]
    done = _fresh(instance)
    assert done.vars["throttle_gate"] == {"throttled": False, "count": 2, "limit": 2, "key": ""}
    counter = ThrottleCounter.objects.get()
    assert (counter.scope, counter.subject) == ("workflow", f"{workflow.key}:gate")


def test_over_the_limit_the_instance_ends_completed_skipped_throttled(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1))
    first = TriggerInstanceFactory(workflow=workflow)
    _run_to_the_end(first)
    second = TriggerInstanceFactory(workflow=workflow)
    assert engine.step_execute(instance_id=second.pk) == StepOutcome.COMPLETED
    ended = _fresh(second)
    assert ended.status == S.COMPLETED and ended.current_node_id is None
    assert _nodes_run(second) == ["gate"]  # the email and the SMS never ran
    log = StepExecutionLog.objects.get(trigger=second)
    assert (log.success, log.skip_reason, log.parked) == (True, SkipReason.THROTTLED, False)
    assert ended.vars["throttle_gate"]["throttled"] is True
    assert ended.vars["throttle_gate"]["skipped"] is True
    assert ended.vars["throttle_gate"]["reason"] == "throttled"


def test_keys_are_counted_apart(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1, key="{{ payload.account }}"))
    for account in ("a", "b"):
        instance = TriggerInstanceFactory(workflow=workflow, payload={"account": account})
        engine.step_execute(instance_id=instance.pk)
        assert _fresh(instance).vars["throttle_gate"]["throttled"] is False
    assert sorted(ThrottleCounter.objects.values_list("key", flat=True)) == ["a", "b"]


def _deferred(workflow) -> TriggerInstance:
    instance = TriggerInstanceFactory(workflow=workflow)
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.WAITING
    return _fresh(instance)


def test_defer_parks_until_the_window_has_room_then_passes(api, dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1, on_limit="defer"))
    _run_to_the_end(TriggerInstanceFactory(workflow=workflow))
    parked = _deferred(workflow)
    assert parked.status == S.ENQUEUED and parked.parked_on == ParkedOn.THROTTLE
    assert parked.current_node_id == "gate"
    assert parked.available_at > timezone.now() + timedelta(minutes=59)
    assert parked.wait_deadline == parked.available_at
    assert parked.vars["throttle_gate"]["deferred_until"] == parked.available_at.isoformat()
    log = StepExecutionLog.objects.get(trigger=parked)
    assert (log.parked, log.skip_reason) == (True, "")
    pending = api.get(f"/api/v1/triggers/{parked.pk}/timeline/").json()["pending"]
    assert pending["waiting_for"]["kind"] == "throttle"
    # Not due yet: nothing runs it.
    assert engine.step_execute(instance_id=parked.pk).startswith("skipped")
    _window_passes()
    TriggerInstance.objects.filter(pk=parked.pk).update(available_at=timezone.now())
    assert _run_to_the_end(parked)[-1] == StepOutcome.COMPLETED
    assert _nodes_run(parked) == ["gate", "gate", "hello", "text"]
    done = _fresh(parked)
    assert done.parked_on == "" and done.vars["throttle_gate"]["throttled"] is False


def test_a_deferred_instance_still_without_room_parks_again(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1, on_limit="defer"))
    _run_to_the_end(TriggerInstanceFactory(workflow=workflow))
    parked = _deferred(workflow)
    TriggerInstance.objects.filter(pk=parked.pk).update(available_at=timezone.now())
    assert engine.step_execute(instance_id=parked.pk) == StepOutcome.WAITING
    assert _fresh(parked).parked_on == ParkedOn.THROTTLE


def test_run_now_releases_a_deferred_instance_and_its_pass_is_counted(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1, on_limit="defer"))
    _run_to_the_end(TriggerInstanceFactory(workflow=workflow))
    parked = _deferred(workflow)
    instance_run_now(instance_id=parked.pk, actor="olive")
    assert _fresh(parked).parked_on == ParkedOn.OVERRIDE
    assert _run_to_the_end(parked)[-1] == StepOutcome.COMPLETED
    output = _fresh(parked).vars["throttle_gate"]
    assert output["throttled"] is False and "released by an operator" in output["note"]
    assert len(ThrottleCounter.objects.get().hits) == 2
    # The release opened the gate for nobody else.
    assert _deferred(workflow).parked_on == ParkedOn.THROTTLE


def test_recipient_scope_counts_a_person_across_workflows(dispatched):
    definition = throttle_definition(limit=1, scope="recipient", key="promo")
    promo, newsletter = (
        WorkflowFactory(definition=definition),
        WorkflowFactory(definition=definition),
    )
    ada, bob = RecipientFactory(), RecipientFactory()
    first = TriggerInstanceFactory(workflow=promo, recipient=ada, payload={})
    engine.step_execute(instance_id=first.pk)
    assert _fresh(first).vars["throttle_gate"]["throttled"] is False
    again = TriggerInstanceFactory(workflow=newsletter, recipient=ada, payload={})
    assert engine.step_execute(instance_id=again.pk) == StepOutcome.COMPLETED
    assert StepExecutionLog.objects.get(trigger=again).skip_reason == SkipReason.THROTTLED
    other = TriggerInstanceFactory(workflow=newsletter, recipient=bob, payload={})
    engine.step_execute(instance_id=other.pk)
    assert _fresh(other).vars["throttle_gate"]["throttled"] is False
    subjects = sorted(ThrottleCounter.objects.values_list("scope", "subject", "key"))
    assert subjects == [("recipient", ada.pk, "promo"), ("recipient", bob.pk, "promo")]


def test_recipient_scope_passes_a_payload_only_instance_uncounted(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1, scope="recipient"))
    for _ in range(2):
        instance = TriggerInstanceFactory(workflow=workflow)
        engine.step_execute(instance_id=instance.pk)
        output = _fresh(instance).vars["throttle_gate"]
        assert output["throttled"] is False and "no recipient" in output["note"]
    assert not ThrottleCounter.objects.exists()


def test_a_key_rendering_over_255_characters_fails_the_instance(dispatched):
    workflow = WorkflowFactory(definition=throttle_definition(key="{{ payload.long }}"))
    instance = TriggerInstanceFactory(workflow=workflow, payload={"long": "x" * 300})
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_PERMANENT
    assert "over the limit of 255" in _fresh(instance).last_error


def test_a_preview_passes_the_throttle_and_counts_nothing(api):
    workflow = WorkflowFactory(definition=throttle_definition(limit=1))
    for _ in range(2):
        body = api.post(
            f"/api/v1/workflows/{workflow.key}/preview/", {"payload": PAYLOAD}, format="json"
        ).json()
        assert body["path"] == ["gate", "hello", "text"], body
        assert body["nodes"][0]["output"]["throttled"] is False
    assert not ThrottleCounter.objects.exists()
