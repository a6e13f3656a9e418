"""A recipient end to end through a real worker (PostgreSQL, Redis, ``celery worker``):
the email reaches a real SMTP server with RFC 8058's headers; the one-click POST of its
List-Unsubscribe URL opts the person out; the next send to them is skipped, and the
skip shows in /metrics (written by the worker process, scraped here)."""

from __future__ import annotations

import email

import pytest
from django.test import Client

from recipients.models import OptOut
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from tests.fake_smtp import FakeSmtpServer
from tests.notifyflow.test_metrics import scrape, value
from tests.worker import celery_worker, flush_broker, wait_until
from triggers.dispatch import dispatch_on_commit
from triggers.models import TriggerInstance, TriggerStatus
from workflows.models import Workflow

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

NEWSLETTER = {
    "entry_node_id": "issue",
    "nodes": [
        {
            "id": "issue",
            "type": "email",
            "config": {"subject": "News", "body": "Leave: {{ unsubscribe_url }}"},
        }
    ],
    "edges": [],
}


def finished(instance: TriggerInstance) -> TriggerInstance:
    wait_until(
        lambda: TriggerInstance.objects.filter(
            pk=instance.pk, status__in=[TriggerStatus.COMPLETED, TriggerStatus.FAILED]
        ).exists(),
        timeout=120,
        what="instance to finish",
    )
    instance.refresh_from_db()
    return instance


def test_send_unsubscribe_then_skip_through_a_real_worker(tmp_path, settings):
    flush_broker()
    shared = tmp_path / "prometheus"
    shared.mkdir()
    settings.PROMETHEUS_MULTIPROC_DIR = str(shared)
    smtp = FakeSmtpServer("accept")
    flow = WorkflowFactory(definition=NEWSLETTER)
    Workflow.objects.filter(pk=flow.pk).update(categories=["news"])
    person = RecipientFactory(id="ada", email="ada@example.com")
    try:
        with celery_worker(
            tmp_path,
            PROMETHEUS_MULTIPROC_DIR=str(shared),
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(smtp.port),
        ):
            before = scrape()
            first = TriggerInstanceFactory(workflow=flow, recipient=person, payload={})
            dispatch_on_commit(first.pk, lane=first.lane)
            assert finished(first).status == TriggerStatus.COMPLETED
            (message,) = [email.message_from_bytes(raw) for raw in smtp.messages]
            assert message["To"] == "ada@example.com"
            assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
            url = "".join(message["List-Unsubscribe"].split()).strip("<>")
            assert url in message.get_payload()
            path = url.removeprefix("http://notifyflow.test")
            response = Client().post(path, {"List-Unsubscribe": "One-Click"})
            assert response.status_code == 200
            assert OptOut.objects.get(recipient=person).scope == "categories.news"

            second = TriggerInstanceFactory(workflow=flow, recipient=person, payload={})
            dispatch_on_commit(second.pk, lane=second.lane)
            assert finished(second).status == TriggerStatus.COMPLETED
            assert len(smtp.messages) == 1
            assert second.vars["email_issue"] == {
                "skipped": True,
                "reason": "preference_opt_out",
                "rule": "categories.news",
            }
            after = scrape()
    finally:
        smtp.close()
    name, labels = "notifyflow_steps_skipped_total", {"reason": "preference_opt_out"}
    assert value(after, name, **labels) - value(before, name, **labels) == 1
