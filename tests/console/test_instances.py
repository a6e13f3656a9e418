"""Operator console: trigger instances (list, detail, retry / run now, permissions)."""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console import support
from console.support import EstimatedCountPaginator
from executions.models import StepExecutionLog
from notifyflow import ids
from tests.admin_helpers import PASSWORD, failed_instance, make_operator, make_superuser
from tests.console.test_drawing import SVG
from tests.console.test_history import skipping_instance
from tests.factories import RecipientFactory, TriggerInstanceFactory, WorkflowFactory
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:triggers_triggerinstance_changelist"


def change_url(instance: TriggerInstance) -> str:
    return reverse("admin:triggers_triggerinstance_change", args=[instance.pk])


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def superuser_client() -> Client:
    return logged_in(make_superuser())


@pytest.fixture
def operator() -> User:
    return make_operator()


@pytest.fixture
def operator_client(operator) -> Client:
    return logged_in(operator)


@pytest.mark.parametrize("who", ["superuser", "operator"])
def test_changelist_and_detail_render_for_superuser_and_operator(who, request):
    client = request.getfixturevalue(f"{who}_client")
    instance = failed_instance()
    response = client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    body = response.content.decode()
    assert ids.short_id(instance.pk) in body
    assert 'class="nf-status nf-status-failed"' in body

    response = client.get(change_url(instance))
    assert response.status_code == 200
    body = response.content.decode()
    # Step logs and status history inline, the graph, payload as escaped JSON.
    assert "to: rendered to an empty phone number" in body
    assert "permanent error: node text" in body
    assert "<svg" in body and 'data-node-id="text"' in body
    assert "&quot;email&quot;: &quot;ada@example.com&quot;" in body
    # Read-only: no save button, no editable field.
    assert 'name="_save"' not in body
    assert 'name="idempotency_key"' not in body


def test_detail_marks_current_and_executed_nodes_in_the_graph(superuser_client):
    instance = failed_instance()
    body = superuser_client.get(change_url(instance)).content.decode()
    start = body.index('class="nf-dag"')
    svg = body[start : body.index("</svg>", start)]
    hello = re.search(r'<g class="([^"]*)" data-node-id="hello"', svg).group(1)
    text = re.search(r'<g class="([^"]*)" data-node-id="text"', svg).group(1)
    assert "nf-node-succeeded" in hello and "nf-node-current" not in hello
    assert "nf-node-failed" in text and "nf-node-current" in text


def test_detail_escapes_payload_and_vars(superuser_client):
    instance = TriggerInstanceFactory(
        payload={"name": "<script>alert(1)</script>"}, vars={"email_hello": {"to": "<b>x</b>"}}
    )
    body = superuser_client.get(change_url(instance)).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "&lt;b&gt;x&lt;/b&gt;" in body


def test_retry_action_audits_the_operator_and_dispatches(
    operator, operator_client, django_capture_on_commit_callbacks
):
    failed = failed_instance()
    completed = TriggerInstanceFactory(status=TriggerStatus.COMPLETED, current_node_id=None)
    with django_capture_on_commit_callbacks() as callbacks:
        response = operator_client.post(
            reverse(CHANGELIST),
            {
                "action": "retry_failed_including_permanent",
                "_selected_action": [failed.pk, completed.pk],
                "confirmed": "1",  # the question a permanent failure asks first
            },
            follow=True,
        )
    assert response.status_code == 200
    texts = [str(m) for m in response.context["messages"]]
    assert "Retried 1 instance(s)." in texts
    assert "1 instance(s) not failed, skipped." in texts
    failed.refresh_from_db()
    assert failed.status == TriggerStatus.ENQUEUED and failed.attempts == 0
    change = TriggerStatusChange.objects.filter(instance=failed).latest("id")
    assert (change.from_status, change.to_status, change.actor) == (
        "failed",
        "enqueued",
        operator.username,
    )
    assert len(callbacks) == 1  # one execute_node message, after commit
    completed.refresh_from_db()
    assert completed.status == TriggerStatus.COMPLETED
    assert not TriggerStatusChange.objects.filter(instance=completed).exists()


def test_run_now_action_makes_a_delayed_instance_due(operator, operator_client):
    later = timezone.now() + timedelta(hours=2)
    delayed = TriggerInstanceFactory(available_at=later, current_node_id="text")
    response = operator_client.post(
        reverse(CHANGELIST), {"action": "run_now", "_selected_action": [delayed.pk]}, follow=True
    )
    assert "Made due now 1 instance(s)." in [str(m) for m in response.context["messages"]]
    delayed.refresh_from_db()
    assert delayed.available_at <= timezone.now()
    change = TriggerStatusChange.objects.get(instance=delayed)
    assert change.actor == operator.username and "run now" in change.reason


def test_retry_button_posts_and_redirects_with_a_message(operator, operator_client):
    instance = failed_instance(error_kind="transient")
    page = operator_client.get(change_url(instance)).content.decode()
    retry_url = reverse("admin:triggers_triggerinstance_retry", args=[instance.pk])
    assert f'action="{retry_url}"' in page and 'id="nf-retry"' in page
    response = operator_client.post(retry_url, follow=True)
    assert response.redirect_chain[-1][0] == change_url(instance)
    assert "Retry scheduled" in " ".join(str(m) for m in response.context["messages"])
    assert (
        TriggerStatusChange.objects.filter(
            instance=instance, to_status="enqueued", actor=operator.username
        ).count()
        == 1
    )
    # A second click finds nothing to retry and says so.
    response = operator_client.post(retry_url, follow=True)
    assert "Not retried: instance" in " ".join(str(m) for m in response.context["messages"])
    assert "only a failed instance can be retried" in " ".join(
        str(m) for m in response.context["messages"]
    )
    assert TriggerStatusChange.objects.filter(instance=instance, to_status="enqueued").count() == 1


def test_retry_button_rejects_get_and_missing_csrf(operator):
    instance = failed_instance()
    retry_url = reverse("admin:triggers_triggerinstance_retry", args=[instance.pk])
    client = Client(enforce_csrf_checks=True)
    client.login(request=HttpRequest(), username=operator.username, password=PASSWORD)
    assert client.get(retry_url).status_code == 405
    assert client.post(retry_url).status_code == 403
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED


def test_user_without_operate_permission_gets_no_actions_and_403():
    viewer = User.objects.create_user("vic", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_triggerinstance"))
    client = logged_in(viewer)
    instance = failed_instance()
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "retry_failed" not in page
    assert 'id="nf-retry"' not in client.get(change_url(instance)).content.decode()
    retry_url = reverse("admin:triggers_triggerinstance_retry", args=[instance.pk])
    assert client.post(retry_url).status_code == 403
    client.post(reverse(CHANGELIST), {"action": "retry_failed", "_selected_action": [instance.pk]})
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert not TriggerStatusChange.objects.filter(instance=instance, to_status="enqueued").exists()


def test_instances_cannot_be_added_changed_or_deleted_even_by_a_superuser(superuser_client):
    instance = failed_instance()
    assert superuser_client.get(reverse("admin:triggers_triggerinstance_add")).status_code == 403
    assert superuser_client.post(change_url(instance), {"status": "completed"}).status_code == 403
    delete_url = reverse("admin:triggers_triggerinstance_delete", args=[instance.pk])
    assert superuser_client.post(delete_url, {"post": "yes"}).status_code == 403
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED


def test_search_matches_exact_id_or_exact_idempotency_key(superuser_client):
    one = TriggerInstanceFactory(idempotency_key="order-1001")
    two = TriggerInstanceFactory(idempotency_key="order-1002")
    url = reverse(CHANGELIST)

    def found(term: str) -> set:
        return {obj.pk for obj in superuser_client.get(url, {"q": term}).context["cl"].result_list}

    assert found("order-1001") == {one.pk}
    assert found(str(two.pk)) == {two.pk}
    assert found("order-10") == set()  # exact only: a LIKE would scan the table
    assert found(str(uuid.uuid4())) == set()


def test_filters_by_status_workflow_and_date(superuser_client):
    wf_a, wf_b = WorkflowFactory(), WorkflowFactory()
    a_failed = failed_instance(workflow=wf_a)
    TriggerInstanceFactory(workflow=wf_a)
    b_enqueued = TriggerInstanceFactory(workflow=wf_b)
    url = reverse(CHANGELIST)

    def ids(**params) -> set:
        response = superuser_client.get(url, params)
        assert response.status_code == 200
        return {obj.pk for obj in response.context["cl"].result_list}

    assert ids(status__exact="failed") == {a_failed.pk}
    assert ids(workflow__id__exact=wf_b.pk) == {b_enqueued.pk}
    assert ids(workflow__id__exact=wf_a.pk, status__exact="failed") == {a_failed.pk}
    tomorrow = (timezone.now() + timedelta(days=1)).isoformat()
    assert ids(created_at__gte=tomorrow) == set()
    assert len(ids(created_at__lt=tomorrow)) == 3


def test_changelist_query_count_does_not_grow_with_rows(superuser_client):
    url = reverse(CHANGELIST)
    workflows = [WorkflowFactory() for _ in range(2)]
    for i in range(3):
        TriggerInstanceFactory(workflow=workflows[i % 2])
    superuser_client.get(url)  # warm the session/content-type caches
    with CaptureQueriesContext(connection) as few:
        assert superuser_client.get(url).status_code == 200
    for i in range(60):
        TriggerInstanceFactory(workflow=workflows[i % 2])
    with CaptureQueriesContext(connection) as many:
        response = superuser_client.get(url)
    assert len(response.context["cl"].result_list) == 50  # one page of 63 rows
    assert len(many) == len(few)
    # The big JSON columns are deferred in the list query.
    listing = [
        q["sql"]
        for q in many.captured_queries
        if '"triggers_triggerinstance"."idempotency_key"' in q["sql"]
    ]
    assert listing
    assert all('"payload"' not in sql and '"vars"' not in sql for sql in listing)


def test_paginator_uses_the_estimate_unfiltered_and_a_capped_count_filtered(monkeypatch):
    for _ in range(4):
        TriggerInstanceFactory()
    monkeypatch.setattr(support, "table_row_estimate", lambda model, using: 2_000_000)
    unfiltered = EstimatedCountPaginator(TriggerInstance.objects.order_by("-created_at"), 50)
    with CaptureQueriesContext(connection) as queries:
        assert unfiltered.count == 2_000_000
    assert unfiltered.count_is_estimate and not queries.captured_queries

    capped = EstimatedCountPaginator(
        TriggerInstance.objects.filter(status="enqueued").order_by("-created_at"), 50
    )
    capped.count_cap = 3
    assert capped.count == 3 and capped.count_is_capped
    exact = EstimatedCountPaginator(TriggerInstance.objects.filter(status="enqueued"), 50)
    assert exact.count == 4 and not exact.count_is_capped


def test_changelist_says_the_count_is_an_estimate(superuser_client, monkeypatch):
    TriggerInstanceFactory()
    monkeypatch.setattr(support, "table_row_estimate", lambda model, using: 1_250_000)
    body = superuser_client.get(reverse(CHANGELIST)).content.decode()
    assert "about 1,250,000" in body


@pytest.mark.postgres
def test_postgres_estimate_comes_from_pg_class_without_count(superuser_client, monkeypatch):
    for _ in range(30):
        TriggerInstanceFactory()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE triggers_triggerinstance")
    monkeypatch.setattr(EstimatedCountPaginator, "exact_below", 10)
    with CaptureQueriesContext(connection) as queries:
        body = superuser_client.get(reverse(CHANGELIST)).content.decode()
    assert "about 30</span>" in body
    assert not [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]


def test_step_log_link_from_instance_filters_by_instance(superuser_client):
    instance = failed_instance()
    other = failed_instance()
    response = superuser_client.get(
        reverse("admin:executions_stepexecutionlog_changelist"),
        {"trigger__id__exact": str(instance.pk)},
    )
    assert response.status_code == 200
    rows = list(response.context["cl"].result_list)
    assert {row.trigger_id for row in rows} == {instance.pk}
    assert StepExecutionLog.objects.filter(trigger=other).count() == 2


def test_detail_shows_the_recipient_and_a_skipped_step_with_its_reason(superuser_client):
    ada = RecipientFactory(id="u-ada")
    instance = TriggerInstanceFactory(recipient=ada, status=TriggerStatus.COMPLETED)
    now = timezone.now()
    StepExecutionLog.objects.create(
        trigger=instance,
        workflow=instance.workflow,
        workflow_version=1,
        node_id="hello",
        node_type="email",
        attempt=1,
        started_at=now,
        finished_at=now,
        input_context={"recipient": {"$ref": "recipient", "id": "u-ada"}},
        output={"skipped": True, "reason": "preference_opt_out", "rule": "categories.marketing"},
        success=True,
        skip_reason="preference_opt_out",
    )
    body = superuser_client.get(change_url(instance)).content.decode()
    assert reverse("admin:recipients_recipient_change", args=["u-ada"]) in body
    assert "preference_opt_out" in body and "categories.marketing" in body
    assert "skipped" in body

    erased = TriggerInstanceFactory(recipient=None, recipient_erased=True)
    assert "[erased]" in superuser_client.get(change_url(erased)).content.decode()


def test_step_log_list_filters_skips_and_the_graph_marks_the_skipped_node(superuser_client):
    from django.utils import timezone

    instance = TriggerInstanceFactory(status=TriggerStatus.COMPLETED)
    now = timezone.now()
    common = {
        "trigger": instance,
        "workflow": instance.workflow,
        "workflow_version": 1,
        "attempt": 1,
        "started_at": now,
        "finished_at": now,
        "input_context": {},
        "success": True,
    }
    StepExecutionLog.objects.create(
        **common,
        node_id="hello",
        node_type="email",
        output={"skipped": True, "reason": "missing_channel_data"},
        skip_reason="missing_channel_data",
    )
    StepExecutionLog.objects.create(**common, node_id="text", node_type="sms", output={})
    logs = reverse("admin:executions_stepexecutionlog_changelist")
    for value, expected in (("any", ["hello"]), ("missing_channel_data", ["hello"]), ("", None)):
        response = superuser_client.get(logs, {"skip_reason": value} if value else {})
        nodes = sorted(log.node_id for log in response.context["cl"].result_list)
        assert nodes == (expected or ["hello", "text"])
    assert "missing_channel_data" in superuser_client.get(logs).content.decode()

    body = superuser_client.get(change_url(instance)).content.decode()
    assert 'class="nf-node nf-node-skipped' in body and "skipped (sent nothing)" in body


def test_the_instance_page_says_why_each_step_skipped_in_its_graph_and_history(
    superuser_client, dispatched
):
    instance = skipping_instance()
    page = superuser_client.get(change_url(instance)).content.decode()
    start = page.index('<svg xmlns="http://www.w3.org/2000/svg" class="nf-dag"')
    svg = ET.fromstring(page[start : page.index("</svg>", start) + 6])
    notes = {
        group.get("data-node-id"): " ".join(
            text.text or "" for text in group if text.get("class") == "nf-node-skip-reason"
        )
        for group in svg.iter(f"{SVG}g")
        if group.get("data-node-id")
    }
    assert notes == {
        "hello": "preference_opt_out, rule channels.email",
        "text": "missing_channel_data",
    }
    history = page[page.index('id="status_changes-group"') :]
    reasons = [
        " ".join(re.sub(r"<[^>]+>", "", cell).split())
        for cell in re.findall(r"<td>(node [^<]*(?:<(?!/td>)[^<]*)*)</td>", history)
    ]
    assert reasons == [
        "node hello done; next text (skipped: preference_opt_out, rule channels.email)",
        "node text done; end of workflow (skipped: missing_channel_data)",
    ]
