"""Per-node retry policy: validated at save, applied by the one retry decider."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions import engine
from executions.outcomes import StepOutcome
from executions.retry_policy import decide_retry
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fakes import ScriptedSmsBackend
from triggers.models import TriggerStatus
from workflows.definition import DefinitionError, validate_definition


def sms_definition(retry: dict | None) -> dict:
    config: dict = {"to": "{{ payload.phone }}", "body": "hi"}
    if retry is not None:
        config["retry"] = retry
    return {
        "entry_node_id": "text",
        "nodes": [{"id": "text", "type": "sms", "config": config}],
        "edges": [],
    }


def test_default_stays_base_times_two_to_the_attempts(settings):
    now = timezone.now()
    delays = [
        decide_retry(attempts_so_far=n, permanent=False, now=now).retry_at - now for n in range(3)
    ]
    assert delays == [timedelta(seconds=60), timedelta(seconds=120), timedelta(seconds=240)]
    assert decide_retry(attempts_so_far=3, permanent=False, now=now).give_up


def test_policy_overrides_count_base_and_cap():
    now = timezone.now()
    policy = {"max_retries": 5, "base_delay_s": 10, "max_delay_s": 30}
    delays = [
        decide_retry(attempts_so_far=n, permanent=False, now=now, policy=policy).retry_at - now
        for n in range(5)
    ]
    assert [d.total_seconds() for d in delays] == [10, 20, 30, 30, 30]
    assert decide_retry(attempts_so_far=5, permanent=False, now=now, policy=policy).give_up
    assert decide_retry(attempts_so_far=0, permanent=True, now=now, policy=policy).give_up


def test_jitter_only_shortens_the_delay_by_at_most_its_fraction():
    now = timezone.now()
    policy = {"base_delay_s": 100, "jitter": 0.5}
    for _ in range(50):
        delay = decide_retry(attempts_so_far=0, permanent=False, now=now, policy=policy)
        assert 50 <= (delay.retry_at - now).total_seconds() <= 100


@pytest.mark.parametrize(
    "retry,field",
    [
        ({"max_retries": -1}, "retry.max_retries"),
        ({"max_retries": True}, "retry.max_retries"),
        ({"base_delay_s": 0}, "retry.base_delay_s"),
        ({"base_delay_s": 10, "max_delay_s": 5}, "retry.max_delay_s"),
        ({"jitter": 2}, "retry.jitter"),
        ({"backoff": "linear"}, "retry.backoff"),
        ("fast", "retry"),
    ],
)
def test_invalid_policy_is_refused_at_save(retry, field):
    with pytest.raises(DefinitionError) as info:
        validate_definition(sms_definition(retry))
    assert info.value.errors[0].field == f"nodes[0].config.{field}"


@pytest.mark.django_db
def test_engine_applies_the_nodes_policy(settings, dispatched):
    settings.SMS_BACKEND = "tests.fakes.ScriptedSmsBackend"
    ScriptedSmsBackend.reset("transient", "transient")
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=sms_definition({"max_retries": 1, "base_delay_s": 5}))
    )
    before = timezone.now()
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED
    assert 4 <= (instance.available_at - before).total_seconds() <= 7
    instance.available_at = timezone.now()
    instance.save(update_fields=["available_at"])
    # max_retries 1: the second failure gives up (the default would retry 3 times).
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and "retries exhausted" in (
        instance.status_changes.order_by("-id").first().reason
    )


def test_a_providers_retry_after_makes_the_wait_at_least_that_long(settings):
    settings.NOTIFYFLOW_RETRY_BASE_DELAY_S = 10
    now = timezone.now()
    policy = {"max_delay_s": 60}

    def wait(attempts_so_far: int, retry_after_s: float | None) -> timedelta:
        decision = decide_retry(
            attempts_so_far=attempts_so_far,
            permanent=False,
            now=now,
            policy=policy,
            retry_after_s=retry_after_s,
        )
        assert decision.retry_at is not None
        return decision.retry_at - now

    assert wait(0, None) == timedelta(seconds=10)
    assert wait(0, 300) == timedelta(seconds=300)  # longer than max_delay_s too
    assert wait(2, 5) == timedelta(seconds=40)  # the policy's wait when it is longer
    # A permanent failure or spent retries still give up, whatever was asked.
    assert decide_retry(attempts_so_far=0, permanent=True, now=now, retry_after_s=30).give_up
