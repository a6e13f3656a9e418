"""The console answers "what failed, why, and what is waiting for what" from the list
and the front page, without a click."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions.engine import step_execute
from executions.outcomes import StepOutcome
from notifyflow.ids import short_id
from tests.admin_helpers import PASSWORD, failed_instance, make_operator
from tests.factories import (
    PAYLOAD,
    TriggerInstanceFactory,
    WorkflowFactory,
    render_error_definition,
)
from triggers.services import instance_retry, trigger_create

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:triggers_triggerinstance_changelist"


@pytest.fixture
def client() -> Client:
    make_operator("olive")
    client = Client()
    client.login(request=HttpRequest(), username="olive", password=PASSWORD)
    return client


def test_list_shows_last_error_and_its_kind_and_filters_by_kind(client):
    failed = failed_instance()
    waiting = TriggerInstanceFactory(available_at=timezone.now() + timedelta(days=12))
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "rendered to an empty phone number" in page
    assert "nf-error-kind-permanent" in page
    only_permanent = client.get(reverse(CHANGELIST), {"error_kind": "permanent"}).content.decode()
    assert short_id(failed.pk) in only_permanent and short_id(waiting.pk) not in only_permanent
    transient = client.get(reverse(CHANGELIST), {"error_kind": "transient"}).content.decode()
    assert short_id(failed.pk) not in transient
    by_text = client.get(reverse(CHANGELIST), {"error": "EMPTY PHONE"}).content.decode()
    assert short_id(failed.pk) in by_text


def test_waiting_instances_say_until_when_with_the_zone_and_how_long(client):
    later = timezone.now() + timedelta(days=12, minutes=5)
    waiting = TriggerInstanceFactory(available_at=later)
    due = TriggerInstanceFactory()
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "in 12d 0h" in page and later.strftime("%Y-%m-%d") in page and " UTC" in page
    assert "due now" in page
    only_waiting = client.get(reverse(CHANGELIST), {"due": "waiting"}).content.decode()
    assert short_id(waiting.pk) in only_waiting and short_id(due.pk) not in only_waiting
    index = client.get(reverse("admin:index")).content.decode()
    assert 'id="nf-waiting">1<' in index
    assert "in 12d 0h" in index


def test_attempts_count_runs_of_a_node_across_operator_retries(client):
    WorkflowFactory(key="typo", definition=render_error_definition())
    instance = trigger_create(workflow="typo", idempotency_key="a", payload=PAYLOAD).instance
    step_execute(instance_id=instance.pk, worker="t")
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.FAILED_PERMANENT
    assert instance_retry(instance_id=instance.pk, actor="olive")
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.FAILED_PERMANENT
    page = client.get(
        reverse("admin:triggers_triggerinstance_change", args=[instance.pk])
    ).content.decode()
    assert "2 (retry budget 1)" in page
    logs = client.get(
        reverse("admin:executions_stepexecutionlog_changelist"), {"q": str(instance.pk)}
    ).content.decode()
    assert "2 (retry budget 1)" in logs
