"""The start-up check of NOTIFYFLOW_PUBLIC_URL (notifyflow.E010): an error exactly when
recipients exist, an active non-critical workflow sends email, and the setting is
unset - never on a fresh start or a payload-only installation (the standard
start)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from executions.checks import check_public_url
from tests.factories import RecipientFactory, WorkflowFactory, email_definition
from workflows.models import Workflow

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]

SMS_ONLY = {
    "entry_node_id": "text",
    "nodes": [{"id": "text", "type": "sms", "config": {"to": "+15550000001", "body": "hi"}}],
    "edges": [],
}


def test_unset_with_an_active_non_critical_email_workflow_is_an_error(settings):
    settings.NOTIFYFLOW_PUBLIC_URL = ""
    WorkflowFactory(key="news", definition=email_definition("hello"))
    assert check_public_url(databases=["default"]) == []  # no recipient yet
    RecipientFactory()
    (error,) = check_public_url(databases=["default"])
    assert error.id == "notifyflow.E010"
    assert "NOTIFYFLOW_PUBLIC_URL is not set" in error.msg and "(news)" in error.msg
    with pytest.raises(SystemCheckError, match="notifyflow.E010"):
        call_command("check", "--database", "default")


def test_no_error_when_set_or_when_no_email_would_need_it(settings):
    RecipientFactory()
    WorkflowFactory(key="news", definition=email_definition("hello"))
    assert check_public_url(databases=["default"]) == []  # set (tests' settings)
    settings.NOTIFYFLOW_PUBLIC_URL = ""
    Workflow.objects.filter(key="news").update(critical=True)
    WorkflowFactory(key="paused-news", definition=email_definition("x"), is_active=False)
    WorkflowFactory(key="texts", definition=SMS_ONLY)
    assert check_public_url(databases=["default"]) == []
    assert check_public_url(databases=None) == []  # a check without the database


def test_a_worker_start_logs_the_error(settings, caplog):
    from executions import worker_hooks

    settings.NOTIFYFLOW_PUBLIC_URL = ""
    RecipientFactory()
    WorkflowFactory(key="news", definition=email_definition("hello"))
    with caplog.at_level("ERROR", logger="notifyflow.celery"):
        worker_hooks._send_checks()
    assert "notifyflow.E010" in caplog.text and "NOTIFYFLOW_PUBLIC_URL" in caplog.text
