"""Operator console: step logs, status changes and deliveries are read-only history."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from executions import engine
from executions.models import Delivery, DeliveryStatus, StepExecutionLog
from executions.outcomes import StepOutcome
from tests.admin_helpers import PASSWORD, failed_instance, make_operator, make_superuser
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerStatusChange

pytestmark = pytest.mark.django_db

MODELS = {
    "stepexecutionlog": ("executions", StepExecutionLog),
    "triggerstatuschange": ("triggers", TriggerStatusChange),
    "delivery": ("executions", Delivery),
}


def client_for(user) -> Client:
    client = Client()
    assert client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def rows():
    instance = failed_instance()
    Delivery.objects.create(
        instance=instance,
        node_id="hello",
        channel="email",
        status=DeliveryStatus.SENT,
        provider_message_id="<m1@example.com>",
        output={"message_id": "<m1@example.com>"},
        attempts=1,
    )
    Delivery.objects.create(
        instance=instance,
        node_id="text",
        channel="sms",
        status=DeliveryStatus.FAILED,
        output={"error": "bad number"},
        attempts=1,
    )
    return {
        "stepexecutionlog": StepExecutionLog.objects.filter(trigger=instance).first(),
        "triggerstatuschange": TriggerStatusChange.objects.filter(instance=instance).first(),
        "delivery": Delivery.objects.filter(instance=instance).first(),
    }


@pytest.mark.parametrize("who", ["superuser", "operator"])
@pytest.mark.parametrize("model_name", list(MODELS))
def test_history_pages_render_read_only(model_name, who, rows):
    user = make_superuser() if who == "superuser" else make_operator()
    client = client_for(user)
    app_label, _ = MODELS[model_name]
    listing = client.get(reverse(f"admin:{app_label}_{model_name}_changelist"))
    assert listing.status_code == 200
    add_url = reverse(f"admin:{app_label}_{model_name}_add")
    assert f'href="{add_url}"' not in listing.content.decode()
    page = client.get(reverse(f"admin:{app_label}_{model_name}_change", args=[rows[model_name].pk]))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()


@pytest.mark.parametrize("model_name", list(MODELS))
def test_history_cannot_be_added_changed_or_deleted_even_by_a_superuser(model_name, rows):
    client = client_for(make_superuser())
    app_label, model = MODELS[model_name]
    row = rows[model_name]
    before = model.objects.filter(pk=row.pk).values().get()
    count = model.objects.count()
    assert client.get(reverse(f"admin:{app_label}_{model_name}_add")).status_code == 403
    change = reverse(f"admin:{app_label}_{model_name}_change", args=[row.pk])
    assert (
        client.post(
            change, {"node_id": "edited", "reason": "edited", "error": "x", "status": "sent"}
        ).status_code
        == 403
    )
    delete = reverse(f"admin:{app_label}_{model_name}_delete", args=[row.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    bulk = client.post(
        reverse(f"admin:{app_label}_{model_name}_changelist"),
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert bulk.status_code in (200, 302)
    assert model.objects.count() == count
    assert model.objects.filter(pk=row.pk).values().get() == before


def test_step_logs_filter_by_node_id_workflow_and_success(rows):
    client = client_for(make_superuser())
    url = reverse("admin:executions_stepexecutionlog_changelist")
    other_workflow = WorkflowFactory()

    def listed(**params) -> list:
        response = client.get(url, params)
        assert response.status_code == 200
        return [(row.node_id, row.success) for row in response.context["cl"].result_list]

    assert listed(node_id="text") == [("text", False)]
    assert listed(success__exact="1") == [("hello", True)]
    assert listed(workflow__id__exact=other_workflow.pk) == []
    assert sorted(listed(workflow__id__exact=rows["stepexecutionlog"].workflow_id)) == [
        ("hello", True),
        ("text", False),
    ]
    page = client.get(url, {"node_id": "text", "success__exact": "0"}).content.decode()
    # The node id box keeps the other filters as hidden inputs.
    assert 'name="success__exact" value="0"' in page
    assert 'name="node_id" value="text"' in page


def test_deliveries_filter_by_node_and_status(rows):
    client = client_for(make_superuser())
    url = reverse("admin:executions_delivery_changelist")
    response = client.get(url, {"node_id": "text"})
    assert [d.node_id for d in response.context["cl"].result_list] == ["text"]
    response = client.get(url, {"status__exact": "sent"})
    assert [d.node_id for d in response.context["cl"].result_list] == ["hello"]


def test_status_changes_search_by_instance_and_actor(rows):
    client = client_for(make_superuser())
    url = reverse("admin:triggers_triggerstatuschange_changelist")
    instance_id = rows["triggerstatuschange"].instance_id
    response = client.get(url, {"q": str(instance_id)})
    assert [c.instance_id for c in response.context["cl"].result_list] == [instance_id]
    response = client.get(url, {"q": "engine"})
    assert len(response.context["cl"].result_list) == 1
    response = client.get(url, {"q": "nobody"})
    assert len(response.context["cl"].result_list) == 0


def test_step_log_changelist_query_count_is_constant_and_defers_json(rows):
    client = client_for(make_superuser())
    url = reverse("admin:executions_stepexecutionlog_changelist")
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for _ in range(5):
        failed_instance()
    with CaptureQueriesContext(connection) as many:
        response = client.get(url)
    assert len(response.context["cl"].result_list) == 12
    assert len(many) == len(few)
    listing = [
        q["sql"]
        for q in many.captured_queries
        if '"executions_stepexecutionlog"."node_id"' in q["sql"]
    ]
    assert listing and all('"input_context"' not in sql for sql in listing)


def skipping_instance():
    """An instance run by the engine whose email is skipped by the recipient's
    preferences (rule ``channels.email``) and whose SMS has no phone to go to."""
    definition = {
        "entry_node_id": "hello",
        "nodes": [
            {"id": "hello", "type": "email", "config": {"subject": "Hi", "body": "Hello"}},
            {"id": "text", "type": "sms", "config": {"body": "Hello"}},
        ],
        "edges": [{"from": "hello", "to": "text"}],
    }
    ada = RecipientFactory(phone=None, preferences={"channels": {"email": False}})
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=definition), recipient=ada
    )
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED
    return instance


def test_the_step_log_list_shows_why_a_step_skipped_without_its_output(dispatched):
    instance = skipping_instance()
    now = timezone.now()
    StepExecutionLog.objects.create(
        trigger=instance,
        workflow=instance.workflow,
        workflow_version=1,
        node_id="later",
        node_type="email",
        attempt=1,
        started_at=now,
        finished_at=now,
        input_context={},
        output={"skipped": True, "reason": "expired", "expires_after": "2h"},
        success=True,
        skip_reason="expired",
    )
    client = client_for(make_operator())
    url = reverse("admin:executions_stepexecutionlog_changelist")
    response = client.get(url, {"trigger__id__exact": str(instance.pk)})
    rows = {log.node_id: log for log in response.context["cl"].result_list}
    assert all("output" in log.get_deferred_fields() for log in rows.values())
    page = response.content.decode()
    outcomes = {
        node: " ".join(re.sub(r"<[^>]+>", " ", html).split())
        for node, html in re.findall(
            r'<td class="field-node_id">([^<]*)</td>.*?<td class="field-outcome">(.*?)</td>',
            page,
            re.S,
        )
    }
    assert outcomes == {
        "later": "skipped expired",
        "text": "skipped missing_channel_data",
        "hello": "skipped preference_opt_out rule channels.email",
    }
    # The step's own page says it too, above its output.
    hello = reverse("admin:executions_stepexecutionlog_change", args=[rows["hello"].pk])
    assert "rule <code>channels.email</code>" in client.get(hello).content.decode()


def test_a_push_deliverys_page_shows_each_devices_result(rows):
    instance = rows["delivery"].instance
    push = Delivery.objects.create(
        instance=instance,
        node_id="notify",
        channel="push",
        status=DeliveryStatus.SENT,
        output={"devices": 2, "accepted": 1, "removed": 1},
        attempts=1,
        targets={
            "dev-1": {
                "provider": "fcm",
                "target": "…Xz9<b>",
                "outcome": "accepted",
                "message_id": "projects/p/messages/0:1",
                "at": "2026-11-28T10:00:00+00:00",
            },
            "dev-2": {
                "provider": "apns",
                "target": "…dead",
                "outcome": "dead",
                "code": "Unregistered",
                "removed": True,
                "at": "2026-11-28T10:00:00+00:00",
            },
        },
    )
    console = client_for(make_operator())
    page = console.get(reverse("admin:executions_delivery_change", args=[push.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "nf-status-accepted" in html and "nf-status-dead" in html
    assert "projects/p/messages/0:1" in html and "Unregistered" in html and "removed" in html
    assert "…Xz9&lt;b&gt;" in html and "<b>" not in html.split("nf-targets")[1][:2000]
    # An email's delivery has no per-target table.
    email = console.get(reverse("admin:executions_delivery_change", args=[rows["delivery"].pk]))
    assert "nf-targets" not in email.content.decode()


def test_step_logs_show_the_locale_a_step_used_and_the_keys_it_lacked(dispatched):
    from translations.services import catalogue_put

    catalogue_put(locale="en", namespace="common", messages={"hi": "Hi", "bye": "Bye"})
    catalogue_put(locale="fr", namespace="common", messages={"hi": "Salut"})
    definition = {
        "entry_node_id": "bell",
        "nodes": [
            {
                "id": "bell",
                "type": "in_app",
                "config": {"title": '{{ "hi" | t }}', "body": '{{ "bye" | t }}'},
            }
        ],
        "edges": [],
    }
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=definition),
        recipient=RecipientFactory(locale="fr"),
    )
    engine.step_execute(instance_id=instance.pk)
    log = StepExecutionLog.objects.get(trigger_id=instance.pk)
    client = client_for(make_operator())

    def locale_cell(url: str) -> str:
        page = client.get(url).content.decode()
        (cell,) = re.findall(r'class="[^"]*field-locale[^"]*">(.*?)</(?:td|div)>', page, re.S)
        return cell

    shown = locale_cell(reverse("admin:triggers_triggerinstance_change", args=[instance.pk]))
    assert "<code>fr</code>" in shown and 'title="bye">1 missing' in shown
    detail = locale_cell(reverse("admin:executions_stepexecutionlog_change", args=[log.pk]))
    assert "<code>fr</code>" in detail and "1 missing" in detail
