"""Operator console: cancel and run now with a reason on the instance page, a retry of a
permanent failure that asks first, what a waiting instance waits for, the idempotency
key in the list, "Recent actions" filled by every operator action, and "View site"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from executions.engine import step_execute
from executions.outcomes import StepOutcome
from tests.admin_helpers import PASSWORD, failed_instance, make_operator
from tests.factories import (
    PAYLOAD,
    TriggerInstanceFactory,
    WorkflowFactory,
    email_sms_definition,
    render_error_definition,
    wait_definition,
)
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.services import trigger_create
from workflows.services import workflow_save

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:triggers_triggerinstance_changelist"


def url(view: str, instance: TriggerInstance) -> str:
    return reverse(f"admin:triggers_triggerinstance_{view}", args=[instance.pk])


def logged_in(user: User) -> Client:
    client = Client()
    assert client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def texts(response) -> str:
    return " | ".join(str(m) for m in response.context["messages"])


def admin_log(instance: TriggerInstance) -> list[LogEntry]:
    return list(
        LogEntry.objects.filter(object_id=str(instance.pk), action_flag=CHANGE).order_by("id")
    )


@pytest.fixture
def operator() -> User:
    return make_operator()


@pytest.fixture
def client(operator) -> Client:
    return logged_in(operator)


def delayed_instance() -> TriggerInstance:
    """Sent its email, now in the 2 h delay node ``wait`` before the SMS (the engine's
    own rows)."""
    WorkflowFactory(key="delayed", definition=email_sms_definition(delay="2h"))
    instance = trigger_create(workflow="delayed", idempotency_key="d-1", payload=PAYLOAD).instance
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.ADVANCED
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.ADVANCED
    instance.refresh_from_db()
    assert instance.available_at > timezone.now() + timedelta(minutes=100)
    return instance


# --- cancel and run now on the instance page ------------------------------------------


def test_cancel_button_takes_a_reason_cancels_audits_and_logs(operator, client):
    instance = delayed_instance()
    page = client.get(url("change", instance)).content.decode()
    assert f'action="{url("cancel", instance)}"' in page
    assert 'id="nf-cancel-reason"' in page and 'id="nf-cancel"' in page

    response = client.post(
        url("cancel", instance), {"reason": "customer unsubscribed"}, follow=True
    )
    assert response.redirect_chain[-1][0] == url("change", instance)
    assert "cancelled" in texts(response)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.CANCELLED
    audit = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert (audit.to_status, audit.actor) == ("cancelled", operator.username)
    assert "customer unsubscribed" in audit.reason
    [entry] = admin_log(instance)
    assert entry.user == operator and "customer unsubscribed" in entry.get_change_message()
    # Finished: the page offers neither cancel nor run now any more.
    page = response.content.decode()
    assert 'id="nf-cancel"' not in page and 'id="nf-run-now"' not in page


def test_cancel_of_a_finished_instance_says_why_and_changes_nothing(client):
    instance = TriggerInstanceFactory(status=TriggerStatus.COMPLETED, current_node_id=None)
    assert 'id="nf-cancel"' not in client.get(url("change", instance)).content.decode()
    response = client.post(url("cancel", instance), {"reason": "x"}, follow=True)
    assert "Not cancelled" in texts(response) and "already completed" in texts(response)
    assert response.context["messages"]._loaded_messages[0].level_tag == "error"
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    assert admin_log(instance) == []


def test_run_now_button_takes_a_reason_makes_the_instance_due_and_logs(operator, client):
    instance = delayed_instance()
    page = client.get(url("change", instance)).content.decode()
    assert f'action="{url("run_now", instance)}"' in page and 'id="nf-run-now-reason"' in page

    response = client.post(url("run_now", instance), {"reason": "customer asked"}, follow=True)
    assert "due now" in texts(response)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED
    assert instance.available_at <= timezone.now()
    audit = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert audit.actor == operator.username and "customer asked" in audit.reason
    [entry] = admin_log(instance)
    assert "Run now" in entry.get_change_message()
    assert "customer asked" in entry.get_change_message()

    # Due already: a second click says so, as the API does.
    response = client.post(url("run_now", instance), {"reason": ""}, follow=True)
    assert "Not run" in texts(response) and "already due" in texts(response)
    assert len(admin_log(instance)) == 1


def test_a_too_long_reason_is_refused(client):
    instance = delayed_instance()
    response = client.post(url("cancel", instance), {"reason": "x" * 501}, follow=True)
    assert "Not cancelled" in texts(response) and "reason" in texts(response)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED


@pytest.mark.parametrize("view", ["cancel", "run_now"])
def test_cancel_and_run_now_need_post_csrf_and_the_operate_permission(operator, view):
    instance = delayed_instance()
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.login(request=HttpRequest(), username=operator.username, password=PASSWORD)
    assert csrf_client.get(url(view, instance)).status_code == 405
    assert csrf_client.post(url(view, instance), {"reason": "r"}).status_code == 403

    viewer = User.objects.create_user("vic", password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_triggerinstance"))
    viewer_client = logged_in(viewer)
    page = viewer_client.get(url("change", instance)).content.decode()
    assert 'id="nf-cancel"' not in page and 'id="nf-run-now"' not in page
    assert viewer_client.post(url(view, instance), {"reason": "r"}).status_code == 403

    before = instance.available_at
    instance.refresh_from_db()
    assert (instance.status, instance.available_at) == (TriggerStatus.ENQUEUED, before)


# --- retry of a permanent failure -----------------------------------------------------


def render_error_instance() -> TriggerInstance:
    WorkflowFactory(key="render-error", definition=render_error_definition())
    instance = trigger_create(workflow="render-error", idempotency_key="r", payload=PAYLOAD)
    pk = instance.instance.pk
    assert step_execute(instance_id=pk, worker="t") == StepOutcome.ADVANCED
    assert step_execute(instance_id=pk, worker="t") == StepOutcome.FAILED_PERMANENT
    return TriggerInstance.objects.get(pk=pk)


def test_retry_of_a_permanent_failure_asks_first_and_says_why(operator, client):
    instance = render_error_instance()
    page = client.get(url("change", instance)).content.decode()
    # The button is a link to the confirmation page, not a one-click POST.
    assert f'href="{url("retry_confirm", instance)}"' in page
    assert f'action="{url("retry", instance)}"' not in page

    # A POST straight to retry (an old page, a script) is sent to the question too.
    response = client.post(url("retry", instance))
    assert response.status_code == 302 and response["Location"] == url("retry_confirm", instance)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED

    confirm = client.get(url("retry_confirm", instance))
    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "will most likely fail again" in body
    assert "permanent" in body and "same workflow version" in body
    assert "payload.nmae" in body or "nmae" in body  # the error itself
    assert "no newer version" in body
    assert 'id="nf-confirm-retry-latest"' not in body

    response = client.post(url("retry", instance), {"confirmed": "1"}, follow=True)
    assert "Retry scheduled" in texts(response)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED
    audit = TriggerStatusChange.objects.filter(instance=instance).latest("id")
    assert (audit.from_status, audit.actor) == ("failed", operator.username)
    [entry] = admin_log(instance)
    assert "Retried" in entry.get_change_message()


def test_confirmation_offers_the_retry_on_the_latest_version(operator, client):
    instance = render_error_instance()
    workflow_save(key="render-error", name="Fixed", definition=email_sms_definition(), actor="d")
    body = client.get(url("retry_confirm", instance)).content.decode()
    assert 'id="nf-confirm-retry-latest"' in body and "v2" in body
    assert f'action="{url("retry_latest", instance)}"' in body

    response = client.post(url("retry_latest", instance), follow=True)
    assert "v2" in texts(response)
    instance.refresh_from_db()
    assert (instance.status, instance.workflow_version.version) == (TriggerStatus.ENQUEUED, 2)
    [entry] = admin_log(instance)
    assert "v2" in entry.get_change_message()


def test_a_transient_failure_is_retried_in_one_click(client):
    instance = failed_instance(error_kind="transient")
    page = client.get(url("change", instance)).content.decode()
    assert f'action="{url("retry", instance)}"' in page
    response = client.post(url("retry", instance), follow=True)
    assert "Retry scheduled" in texts(response)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.ENQUEUED


def test_bulk_retry_including_permanent_failures_asks_first(operator, client):
    permanent = failed_instance()
    transient = failed_instance(error_kind="transient")
    selection = {
        "action": "retry_failed_including_permanent",
        "_selected_action": [permanent.pk, transient.pk],
    }
    response = client.post(reverse(CHANGELIST), selection)
    assert response.status_code == 200
    body = response.content.decode()
    assert "1 of the selected instances failed with a permanent error" in body
    assert "will most likely fail again" in body and "empty phone number" in body
    assert 'name="confirmed"' in body and str(permanent.pk) in body and str(transient.pk) in body
    for instance in (permanent, transient):
        instance.refresh_from_db()
        assert instance.status == TriggerStatus.FAILED  # nothing retried yet

    response = client.post(reverse(CHANGELIST), {**selection, "confirmed": "1"}, follow=True)
    assert "Retried 2 instance(s)." in texts(response)
    for instance in (permanent, transient):
        instance.refresh_from_db()
        assert instance.status == TriggerStatus.ENQUEUED


def test_edit_payload_and_api_key_revoke_write_recent_actions(operator, client):
    from api_keys.models import ApiKey
    from api_keys.services import api_key_create
    from tests.admin_helpers import grant_edit_payload, make_superuser

    instance = failed_instance()
    editor = logged_in(grant_edit_payload(operator))
    response = editor.post(
        url("edit_payload", instance), {"payload": '{"name": "Ada", "phone": "+15005550006"}'}
    )
    assert response.status_code == 302
    [entry] = admin_log(instance)
    assert "Payload edited" in entry.get_change_message()

    key, _ = api_key_create(name="ci")
    root = make_superuser()
    logged_in(root).post(
        reverse("admin:api_keys_apikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
    )
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    [entry] = LogEntry.objects.filter(object_id=str(key.pk))
    assert (entry.user, entry.get_change_message()) == (root, "Revoked")


# --- what a waiting instance waits for ------------------------------------------------


def waiting_for(client: Client, instance: TriggerInstance) -> str:
    """The "waiting for" field of the instance page, as rendered."""
    body = client.get(url("change", instance)).content.decode()
    start = body.index('class="readonly"', body.index("field-waiting_display"))
    return body[start : body.index("</div>", start)]


def test_a_delay_shows_its_node_rule_and_until_when(client):
    instance = delayed_instance()
    shown = waiting_for(client, instance)
    assert "delay node <code>wait</code>" in shown and "duration=2h" in shown
    assert "in 1h 5" in shown or "in 1h 59m" in shown
    assert instance.available_at.strftime("%Y-%m-%d") in shown
    assert "then node <code>text</code> runs" in shown


def test_a_retry_backoff_shows_the_failure_and_the_next_attempt(client):
    instance = TriggerInstanceFactory(
        current_node_id="text",
        attempts=2,
        last_error="node text: Twilio 503: service unavailable",
        available_at=timezone.now() + timedelta(minutes=3),
    )
    shown = waiting_for(client, instance)
    assert "retry backoff" in shown and "attempt 2 of node <code>text</code>" in shown
    assert "Twilio 503" in shown and "in 2m" in shown


def test_a_wait_shows_the_event_and_its_deadline(client):
    WorkflowFactory(key="listen", definition=wait_definition(event="order.paid", timeout="1h"))
    instance = trigger_create(workflow="listen", idempotency_key="w", payload=PAYLOAD).instance
    assert step_execute(instance_id=instance.pk, worker="t") == StepOutcome.WAITING
    instance.refresh_from_db()
    shown = waiting_for(client, instance)
    assert "event <code>order.paid</code> at node <code>listen</code>" in shown
    assert instance.wait_deadline.strftime("%Y-%m-%d") in shown and "in 59m" in shown
    assert "times out" in shown


def test_a_due_instance_waits_for_nothing(client):
    instance = TriggerInstanceFactory()
    assert "nothing: due now" in waiting_for(client, instance)


# --- the list, the log, "View site" ---------------------------------------------------


def test_changelist_shows_the_idempotency_key_and_finds_by_it(client):
    TriggerInstanceFactory(idempotency_key="order-4711-welcome")
    TriggerInstanceFactory(idempotency_key="order-4712-welcome")
    response = client.get(reverse(CHANGELIST))
    body = response.content.decode()
    assert 'class="column-idempotency_key_short' in body
    assert "order-4711-welcome" in body and "order-4712-welcome" in body
    found = client.get(reverse(CHANGELIST), {"q": "order-4712-welcome"}).context["cl"]
    assert [obj.idempotency_key for obj in found.result_list] == ["order-4712-welcome"]


@pytest.mark.parametrize(
    ("action", "make", "message"),
    [
        ("retry_failed", lambda: failed_instance(error_kind="transient"), "Retried"),
        ("retry_failed_including_permanent", failed_instance, "Retried"),
        (
            "run_now",
            lambda: TriggerInstanceFactory(available_at=timezone.now() + timedelta(hours=1)),
            "Run now",
        ),
        ("cancel", TriggerInstanceFactory, "Cancelled"),
    ],
)
def test_bulk_actions_write_recent_actions(operator, client, action, make, message):
    done = make()
    skipped = TriggerInstanceFactory(status=TriggerStatus.COMPLETED, current_node_id=None)
    client.post(
        reverse(CHANGELIST),
        {"action": action, "_selected_action": [done.pk, skipped.pk], "confirmed": "1"},
    )
    [entry] = admin_log(done)
    assert entry.user == operator and message in entry.get_change_message()
    assert admin_log(skipped) == []
    # The front page's "Recent actions" lists it, linked to the instance.
    index = client.get(reverse("admin:index")).content.decode()
    assert url("change", done) in index


def test_workflow_actions_write_recent_actions():
    from tests.admin_helpers import make_superuser

    client = logged_in(make_superuser())
    workflow = WorkflowFactory()
    changelist = reverse("admin:workflows_workflow_changelist")
    for action in ("pause", "resume", "deactivate", "activate"):
        client.post(changelist, {"action": action, "_selected_action": [workflow.pk]})
    messages = [
        entry.get_change_message()
        for entry in LogEntry.objects.filter(object_id=str(workflow.pk)).order_by("id")
    ]
    assert messages == ["Paused", "Resumed", "Deactivated", "Activated"]


def test_view_site_links_to_the_api_docs(client):
    body = client.get(reverse("admin:index")).content.decode()
    docs = reverse("docs")
    assert f'<a href="{docs}">View site</a>' in body
    assert client.get(docs).status_code == 200
