"""Retry that can succeed: on the workflow's latest version (the usual fix for a render
error), or with an edited payload; the bulk action does not blindly retry permanent
failures. Every one of them audited with what changed."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from executions.engine import step_execute
from executions.outcomes import StepOutcome
from notifyflow.errors import ApplicationError, ConflictError
from tests.admin_helpers import PASSWORD, grant_edit_payload, make_operator
from tests.factories import PAYLOAD, WorkflowFactory, email_sms_definition, render_error_definition
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import (
    instance_edit_payload_and_retry,
    instance_retry_on_latest_version,
    trigger_create,
)
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:triggers_triggerinstance_changelist"


def render_error_instance(key: str = "render-error") -> TriggerInstance:
    """An instance that failed permanently on a render error in its SMS node."""
    WorkflowFactory(key=key, definition=render_error_definition())
    instance = trigger_create(workflow=key, idempotency_key="i-1", payload=PAYLOAD).instance
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    return instance


def fix_workflow(key: str = "render-error") -> None:
    workflow_save(key=key, name="Fixed", definition=email_sms_definition(), actor="dev")


def test_retry_on_latest_version_pins_it_audits_and_completes():
    instance = render_error_instance()
    fix_workflow()
    assert instance_retry_on_latest_version(instance_id=instance.pk, actor="olive") == 2
    instance.refresh_from_db()
    assert (instance.status, instance.workflow_version.version) == (TriggerStatus.ENQUEUED, 2)
    audit = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert (audit.from_status, audit.to_status, audit.actor) == ("failed", "enqueued", "olive")
    assert "v2 (was v1)" in audit.reason
    assert audit.details == {"old_version": 1, "new_version": 2}
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.COMPLETED


def test_a_plain_retry_of_a_render_error_fails_again_on_the_pinned_version():
    from triggers.services import instance_retry

    instance = render_error_instance()
    fix_workflow()
    assert instance_retry(instance_id=instance.pk, actor="olive")
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.FAILED_PERMANENT


def test_retry_on_latest_version_refuses_when_already_latest_or_not_failed():
    instance = render_error_instance()
    with pytest.raises(ConflictError) as already:
        instance_retry_on_latest_version(instance_id=instance.pk, actor="olive")
    assert already.value.code == "no_newer_version"
    fix_workflow()
    instance_retry_on_latest_version(instance_id=instance.pk, actor="olive")
    with pytest.raises(ConflictError) as not_failed:
        instance_retry_on_latest_version(instance_id=instance.pk, actor="olive")
    assert not_failed.value.code == "not_failed"


def test_retry_on_latest_version_refuses_a_version_without_the_failed_node():
    instance = render_error_instance()
    definition = email_sms_definition()
    definition["nodes"] = definition["nodes"][:1]
    definition["edges"] = []
    workflow_save(key="render-error", name="x", definition=definition)
    with pytest.raises(ConflictError) as missing:
        instance_retry_on_latest_version(instance_id=instance.pk, actor="olive")
    assert missing.value.code == "node_not_in_version"
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED


def test_edit_payload_and_retry_audits_old_and_new_payload():
    WorkflowFactory(key="needs-name", definition=email_sms_definition())
    instance = trigger_create(
        workflow="needs-name", idempotency_key="p", payload={"email": "ada@example.com"}
    ).instance
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.FAILED_PERMANENT
    edited = instance_edit_payload_and_retry(
        instance_id=instance.pk, actor="olive", payload=PAYLOAD
    )
    assert edited.status == TriggerStatus.ENQUEUED and edited.payload == PAYLOAD
    audit = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert audit.details == {"old_payload": {"email": "ada@example.com"}, "new_payload": PAYLOAD}
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.COMPLETED


def test_edit_payload_refuses_what_the_api_refuses():
    instance = render_error_instance()
    with pytest.raises(ApplicationError) as nul:
        instance_edit_payload_and_retry(
            instance_id=instance.pk, actor="olive", payload={"name": "a\x00b"}
        )
    assert (nul.value.field, nul.value.code) == ("payload.name", "nul_character")
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED


def test_edit_payload_page_needs_its_own_permission():
    instance = render_error_instance()
    operator = make_operator("olive")
    client = Client()
    client.login(request=HttpRequest(), username="olive", password=PASSWORD)
    url = reverse("admin:triggers_triggerinstance_edit_payload", args=[instance.pk])
    page = client.get(reverse("admin:triggers_triggerinstance_change", args=[instance.pk]))
    assert b"nf-edit-payload" not in page.content
    assert client.get(url).status_code == 403

    grant_edit_payload(operator)
    page = client.get(reverse("admin:triggers_triggerinstance_change", args=[instance.pk]))
    assert b'id="nf-edit-payload"' in page.content
    new = {**PAYLOAD, "nmae": "Ada"}
    response = client.post(url, {"payload": '{"bad": '})
    assert response.status_code == 200 and b"Enter a valid JSON" in response.content
    response = client.post(url, {"payload": __import__("json").dumps(new)}, follow=True)
    assert b"Payload replaced and retry scheduled" in response.content
    instance.refresh_from_db()
    assert instance.payload == new and instance.status == TriggerStatus.ENQUEUED
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.COMPLETED


def test_retry_latest_button_shows_the_version_and_retries():
    instance = render_error_instance()
    make_operator("olive")
    client = Client()
    client.login(request=HttpRequest(), username="olive", password=PASSWORD)
    change = reverse("admin:triggers_triggerinstance_change", args=[instance.pk])
    assert b"nf-retry-latest" not in client.get(change).content
    fix_workflow()
    assert b"Retry on latest version (v2)" in client.get(change).content
    response = client.post(
        reverse("admin:triggers_triggerinstance_retry_latest", args=[instance.pk]), follow=True
    )
    assert b"Retry scheduled on workflow version v2" in response.content
    instance.refresh_from_db()
    assert instance.workflow_version.version == 2


def test_bulk_retry_skips_permanent_failures_unless_asked():
    permanent = render_error_instance()
    transient = TriggerInstance.objects.create(
        workflow=permanent.workflow,
        workflow_version=permanent.workflow_version,
        idempotency_key="transient",
        payload=PAYLOAD,
        status=TriggerStatus.FAILED,
        current_node_id="text",
        available_at=permanent.available_at,
        last_error="node text: Twilio 503",
    )
    from executions.models import StepExecutionLog

    StepExecutionLog.objects.create(
        trigger=transient,
        workflow=transient.workflow,
        workflow_version=1,
        node_id="text",
        node_type="sms",
        attempt=4,
        started_at=permanent.created_at,
        finished_at=permanent.created_at,
        success=False,
        error="Twilio 503",
        error_kind="transient",
    )
    make_operator("olive")
    client = Client()
    client.login(request=HttpRequest(), username="olive", password=PASSWORD)
    both = [permanent.pk, transient.pk]
    response = client.post(
        reverse(CHANGELIST), {"action": "retry_failed", "_selected_action": both}, follow=True
    )
    texts = [str(m) for m in response.context["messages"]]
    assert "Retried 1 instance(s)." in texts
    assert any(t.startswith("1 permanent failure(s) skipped") for t in texts)
    permanent.refresh_from_db()
    assert permanent.status == TriggerStatus.FAILED
    asked = {"action": "retry_failed_including_permanent", "_selected_action": [permanent.pk]}
    response = client.post(reverse(CHANGELIST), asked)
    assert b"will most likely fail again" in response.content  # asks first
    permanent.refresh_from_db()
    assert permanent.status == TriggerStatus.FAILED
    client.post(reverse(CHANGELIST), {**asked, "confirmed": "1"})
    permanent.refresh_from_db()
    assert permanent.status == TriggerStatus.ENQUEUED
