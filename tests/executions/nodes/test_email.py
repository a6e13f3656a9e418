"""The email node and its recipient: `to` defaults to the recipient's
address read when the step runs, preferences decide once per send, skips are outcomes,
and every email of a non-critical workflow to a recipient carries RFC 8058's headers -
checked on what a real SMTP server receives."""

from __future__ import annotations

import email
from email.message import Message

import pytest
from django.core import mail
from django.utils import timezone

from executions import engine
from executions.models import StepExecutionLog
from executions.outcomes import StepOutcome
from recipients.models import OptOut, Recipient
from recipients.preferences import opt_out
from recipients.unsubscribe import read_token
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from tests.fake_smtp import FakeSmtpServer
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def to_recipient(**config: str) -> dict:
    return {
        "entry_node_id": "hello",
        "nodes": [
            {
                "id": "hello",
                "type": "email",
                "config": {
                    "subject": "Hi {{ recipient.properties.name | default: 'there' }}",
                    "body": "Bye: {{ unsubscribe_url }}",
                    **config,
                },
            }
        ],
        "edges": [],
    }


def workflow(definition: dict | None = None, **settings_: object) -> Workflow:
    flow = WorkflowFactory(definition=definition or to_recipient())
    if settings_:
        Workflow.objects.filter(pk=flow.pk).update(**settings_)
    return flow


@pytest.fixture
def smtp(settings):
    server = FakeSmtpServer("accept")
    settings.NOTIFYFLOW_EMAIL_BACKENDS = [server.provider("smtp")]
    yield server
    server.close()


def received(server: FakeSmtpServer) -> list[Message]:
    return [email.message_from_bytes(raw) for raw in server.messages]


def unsubscribe_token(message: Message) -> str:
    """The token of the List-Unsubscribe URL (the header may be folded)."""
    url = "".join(message["List-Unsubscribe"].split()).strip("<>")
    assert url.startswith("http://notifyflow.test/u/") and url.endswith("/")
    return url.split("/u/")[1].rstrip("/")


def run(instance: TriggerInstance) -> StepOutcome:
    return engine.step_execute(instance_id=instance.pk)


def last_log(instance: TriggerInstance) -> StepExecutionLog:
    return StepExecutionLog.objects.filter(trigger_id=instance.pk).latest("id")


def test_an_email_without_to_goes_to_the_recipient_with_one_click_unsubscribe_headers(
    smtp, dispatched
):
    person = RecipientFactory(id="ada", email="ada@example.com", properties={"name": "Ada"})
    flow = workflow()
    instance = TriggerInstanceFactory(workflow=flow, recipient=person, payload={})
    assert run(instance) == StepOutcome.COMPLETED
    (message,) = received(smtp)
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Hi Ada"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    token = unsubscribe_token(message)
    assert read_token(token) == ("ada", f"workflows.{flow.key}")
    assert f"Bye: http://notifyflow.test/u/{token}/" in message.get_payload()
    # The rule that let it go is recorded with the send, as with a skip.
    assert last_log(instance).output["rule"] == "default"


def test_the_unsubscribe_scope_is_the_workflows_first_category(smtp, dispatched):
    person = RecipientFactory(id="bob")
    flow = workflow(categories=["marketing", "digest"])
    run(TriggerInstanceFactory(workflow=flow, recipient=person))
    (message,) = received(smtp)
    assert read_token(unsubscribe_token(message)) == ("bob", "categories.marketing")


def test_a_critical_workflow_ignores_preferences_and_adds_no_unsubscribe_headers(smtp, dispatched):
    person = RecipientFactory(preferences={"channels": {"email": False}})
    flow = workflow(critical=True)
    assert run(TriggerInstanceFactory(workflow=flow, recipient=person)) == StepOutcome.COMPLETED
    (message,) = received(smtp)
    assert message["To"] == person.email
    assert message["List-Unsubscribe"] is None and message["List-Unsubscribe-Post"] is None
    instance = TriggerInstance.objects.get(workflow=flow)
    assert instance.vars["email_hello"]["rule"] == "critical"
    assert "Bye: \n" in message.get_payload() or message.get_payload().strip() == "Bye:"


def test_a_payload_only_email_carries_no_unsubscribe_headers(smtp, dispatched):
    flow = workflow(to_recipient(to="{{ payload.email }}"))
    instance = TriggerInstanceFactory(workflow=flow)
    run(instance)
    (message,) = received(smtp)
    assert message["List-Unsubscribe"] is None
    assert "rule" not in last_log(instance).output  # no recipient, no preferences


def test_an_opted_out_recipient_is_skipped_with_the_deciding_rule(dispatched):
    person = RecipientFactory(
        preferences={"channels": {"email": True}, "categories": {"marketing": False}}
    )
    flow = workflow(categories=["marketing"])
    instance = TriggerInstanceFactory(workflow=flow, recipient=person)
    assert run(instance) == StepOutcome.COMPLETED
    assert mail.outbox == []
    skip = {"skipped": True, "reason": "preference_opt_out", "rule": "categories.marketing"}
    log = last_log(instance)
    assert (log.success, log.skip_reason, log.output) == (True, "preference_opt_out", skip)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    assert instance.vars == {"email_hello": skip}


def test_preferences_apply_to_an_explicit_to_as_well(dispatched):
    person = RecipientFactory(preferences={"workflows": {"news": {"channels": {"email": False}}}})
    flow = WorkflowFactory(key="news", definition=to_recipient(to="{{ payload.email }}"))
    instance = TriggerInstanceFactory(workflow=flow, recipient=person)
    run(instance)
    assert mail.outbox == []
    assert last_log(instance).output["rule"] == "workflows.news.channels.email"


def test_a_recipient_without_an_email_address_is_skipped_for_missing_channel_data(dispatched):
    person = RecipientFactory(email=None, phone="+15551234567")
    instance = TriggerInstanceFactory(workflow=workflow(), recipient=person)
    assert run(instance) == StepOutcome.COMPLETED
    assert mail.outbox == []
    log = last_log(instance)
    assert log.skip_reason == "missing_channel_data"
    assert log.output == {"skipped": True, "reason": "missing_channel_data"}


def test_no_to_and_no_recipient_fails_the_step_naming_the_node(dispatched):
    instance = TriggerInstanceFactory(workflow=workflow())
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "node hello has no `to` and instance has no recipient" in instance.last_error


def test_a_changed_address_is_used_by_the_next_send(dispatched):
    person = RecipientFactory(email="old@example.com")
    instance = TriggerInstanceFactory(workflow=workflow(), recipient=person)
    Recipient.objects.filter(pk=person.pk).update(email="new@example.com")
    run(instance)
    assert [m.to for m in mail.outbox] == [["new@example.com"]]


def test_an_opt_out_during_a_delay_is_honoured_by_the_next_step(dispatched):
    definition = to_recipient()
    definition["nodes"].insert(0, {"id": "later", "type": "delay", "config": {"duration": "2d"}})
    definition["entry_node_id"] = "later"
    definition["edges"] = [{"from": "later", "to": "hello"}]
    person = RecipientFactory()
    flow = workflow(definition)
    instance = TriggerInstanceFactory(workflow=flow, recipient=person)
    assert run(instance) == StepOutcome.ADVANCED
    assert opt_out(recipient_id=person.pk, scope=f"workflows.{flow.key}", source="one_click")
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    assert run(instance) == StepOutcome.COMPLETED
    assert mail.outbox == []
    assert last_log(instance).output["rule"] == f"workflows.{flow.key}"
    assert OptOut.objects.get(recipient=person).source == "one_click"


def test_step_logs_keep_the_recipient_by_reference_not_their_data(dispatched):
    person = RecipientFactory(id="cy", email="cy@example.com", properties={"name": "Cy"})
    instance = TriggerInstanceFactory(workflow=workflow(), recipient=person, payload={})
    run(instance)
    context = last_log(instance).input_context
    assert context["recipient"] == {"$ref": "recipient", "id": "cy"}
    assert "unsubscribe_url" not in context
    assert "Cy" not in str(context)


def test_an_unset_public_url_fails_a_recipients_non_critical_email_clearly(settings, dispatched):
    settings.NOTIFYFLOW_PUBLIC_URL = ""
    instance = TriggerInstanceFactory(workflow=workflow(), recipient=RecipientFactory())
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    assert mail.outbox == []
    instance.refresh_from_db()
    assert "NOTIFYFLOW_PUBLIC_URL is not set" in instance.last_error
