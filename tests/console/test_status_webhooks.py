"""Operator console for status webhooks: endpoints created through the services with the
secret shown once, the Rotate / Replay / Enable actions, messages with their attempts;
operators view only."""

from __future__ import annotations

import html
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin import helpers
from django.contrib.messages import get_messages
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from status_webhooks import delivery
from status_webhooks.models import EndpointChange, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import WebhookEndpointFactory
from tests.fake_http import FakeEndpoint

pytestmark = pytest.mark.django_db
HOST = "hooks.example.com"
ENDPOINTS = "admin:status_webhooks_webhookendpoint_changelist"
MESSAGES = "admin:status_webhooks_webhookmessage_changelist"


@pytest.fixture(autouse=True)
def allowed(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [HOST]


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def _notes(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _add(client, **fields):
    data = {
        "url": f"https://{HOST}/in",
        "description": "billing",
        "event_types": ["instance.completed", "delivery.*"],
        "is_active": "on",
        "changes-TOTAL_FORMS": "0",
        "changes-INITIAL_FORMS": "0",
        **fields,
    }
    return client.post(reverse("admin:status_webhooks_webhookendpoint_add"), data, follow=True)


def test_adding_an_endpoint_shows_its_secret_once_and_audits_the_admin():
    client = logged_in(make_superuser())
    response = _add(client)
    assert response.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    notes = " ".join(_notes(response))
    assert endpoint.secret in notes and "not shown again" in notes
    assert endpoint.event_types == ["instance.completed", "delivery.*"]
    change_page = client.get(
        reverse("admin:status_webhooks_webhookendpoint_change", args=[endpoint.pk])
    )
    assert change_page.status_code == 200 and endpoint.secret not in change_page.content.decode()
    assert EndpointChange.objects.get().actor == "admin:root"


def test_a_host_outside_the_allow_list_is_a_form_error_and_nothing_is_saved():
    client = logged_in(make_superuser())
    response = _add(client, url="https://evil.example.org/in")
    assert "is not allowed by NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_editing_goes_through_the_service_and_keeps_the_secret():
    endpoint = WebhookEndpointFactory(url=f"https://{HOST}/old")
    client = logged_in(make_superuser())
    url = reverse("admin:status_webhooks_webhookendpoint_change", args=[endpoint.pk])
    response = client.post(
        url,
        {
            "url": f"https://{HOST}/new",
            "description": "",
            "event_types": ["instance.failed"],
            "changes-TOTAL_FORMS": "0",
            "changes-INITIAL_FORMS": "0",
        },
        follow=True,
    )
    assert response.status_code == 200
    fresh = WebhookEndpoint.objects.get()
    assert fresh.url == f"https://{HOST}/new" and fresh.secret == endpoint.secret
    assert fresh.is_active is False  # the unchecked box
    change = EndpointChange.objects.get(action="updated")
    assert change.actor == "admin:root" and change.details["url"][1] == f"https://{HOST}/new"


def _action(client, action, endpoints, **extra):
    data = {"action": action, helpers.ACTION_CHECKBOX_NAME: [str(e.pk) for e in endpoints]}
    return client.post(reverse(ENDPOINTS), {**data, **extra}, follow=True)


def test_rotate_secret_shows_the_new_secret_once():
    endpoint = WebhookEndpointFactory(url=f"https://{HOST}/in")
    client = logged_in(make_superuser())
    response = _action(client, "rotate_secret", [endpoint])
    fresh = WebhookEndpoint.objects.get()
    assert fresh.secret != endpoint.secret and fresh.previous_secret == endpoint.secret
    assert fresh.secret in " ".join(_notes(response))
    assert EndpointChange.objects.get().action == "secret_rotated"


def test_replay_asks_for_the_range_then_requeues_it():
    endpoint = WebhookEndpointFactory(url=f"https://{HOST}/in")
    since = timezone.now() - timedelta(minutes=1)
    record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
    WebhookMessage.objects.update(status="failed", attempts=8)
    client = logged_in(make_superuser())
    form = _action(client, "replay", [endpoint])
    assert form.status_code == 200 and 'name="since"' in form.content.decode()
    done = _action(
        client,
        "replay",
        [endpoint],
        apply="1",
        since=since.strftime("%Y-%m-%d %H:%M:%S"),
    )
    assert "1 message(s) queued again" in " ".join(_notes(done))
    assert WebhookMessage.objects.get().status == "pending"
    assert EndpointChange.objects.get().action == "replayed"


def test_enable_clears_the_disabled_state():
    endpoint = WebhookEndpointFactory(
        url=f"https://{HOST}/in",
        is_active=False,
        disabled_at=timezone.now(),
        failing_since=timezone.now() - timedelta(days=5),
        disabled_reason="every attempt failed for 5 days",
    )
    client = logged_in(make_superuser())
    _action(client, "enable", [endpoint])
    fresh = WebhookEndpoint.objects.get()
    assert fresh.is_active and fresh.disabled_at is None and fresh.failing_since is None


def test_operators_view_endpoints_and_messages_but_change_nothing(settings):
    endpoint = WebhookEndpointFactory(url=f"https://{HOST}/in")
    client = logged_in(make_operator())
    assert client.get(reverse(ENDPOINTS)).status_code == 200
    change = reverse("admin:status_webhooks_webhookendpoint_change", args=[endpoint.pk])
    page = client.get(change)
    assert page.status_code == 200 and endpoint.secret not in page.content.decode()
    assert client.get(reverse("admin:status_webhooks_webhookendpoint_add")).status_code == 403
    assert client.get(reverse(MESSAGES)).status_code == 200
    response = _action(client, "rotate_secret", [endpoint])
    assert WebhookEndpoint.objects.get().secret == endpoint.secret
    assert response.status_code == 200


def test_messages_list_filters_and_shows_attempts(settings):
    with FakeEndpoint() as receiver:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
        endpoint = WebhookEndpointFactory(
            url=receiver.url, event_types=["instance.completed", "instance.failed"]
        )
        receiver.responses = [503]
        record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
        delivery.deliver_due()
    client = logged_in(make_operator())
    body = client.get(reverse(MESSAGES), {"endpoint__id__exact": endpoint.pk}).content.decode()
    assert "instance.completed" in body and "Pending" in body
    filtered = client.get(reverse(MESSAGES), {"type": "instance.failed"}).content.decode()
    assert 'id="result_list"' not in filtered and "0 webhook messages" in filtered
    message = WebhookMessage.objects.get()
    page = client.get(
        reverse("admin:status_webhooks_webhookmessage_change", args=[message.pk])
    ).content.decode()
    assert "503" in page and "{&quot;error&quot;: &quot;nope&quot;}" in page


def test_deleting_in_the_console_goes_through_the_service_and_keeps_the_audit_trail():
    endpoint = WebhookEndpointFactory(url=f"https://{HOST}/in")
    client = logged_in(make_superuser())
    url = reverse("admin:status_webhooks_webhookendpoint_delete", args=[endpoint.pk])
    assert client.post(url, {"post": "yes"}, follow=True).status_code == 200
    assert not WebhookEndpoint.objects.exists()
    change = EndpointChange.objects.get()
    assert (change.action, change.actor, change.endpoint_url) == (
        "deleted",
        "admin:root",
        endpoint.url,
    )


def _text(html_: str) -> str:
    blocks = re.sub(r"</?(?:div|td|p)\b[^>]*>", " ", html_)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", blocks)).split())


def _column(page: str, field: str) -> str:
    """The text of a list's column (the first row)."""
    found = re.search(rf'<td class="field-{field}">(.*?)</td>', page, re.S)
    assert found is not None, field
    return _text(found.group(1))


def _field(page: str, field: str) -> str:
    """The text of a change page's read-only field."""
    found = re.search(
        rf'field-{field}">.*?<div class="readonly">(.*?)</div>\s*</div>\s*</div>', page, re.S
    )
    assert found is not None, field
    return _text(found.group(1))


def test_a_failing_endpoint_shows_the_error_of_its_latest_failed_attempt(settings):
    with FakeEndpoint() as receiver:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
        endpoint = WebhookEndpointFactory(url=receiver.url)
        receiver.responses = [500, 503]
        record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
        delivery.deliver_due()
        WebhookMessage.objects.update(next_attempt_at=timezone.now())
        delivery.deliver_due()
    endpoint.refresh_from_db()
    assert endpoint.failing_since is not None
    message = WebhookMessage.objects.get()
    assert list(message.tries.values_list("error", flat=True)) == ["HTTP 500", "HTTP 503"]
    client = logged_in(make_operator())
    listed = client.get(reverse(ENDPOINTS)).content.decode()
    assert _column(listed, "failing_column").endswith("HTTP 503")
    url = reverse("admin:status_webhooks_webhookendpoint_change", args=[endpoint.pk])
    page = client.get(url).content.decode()
    last_error = _field(page, "last_error")
    assert last_error.startswith("HTTP 503 at ")
    assert last_error.endswith('(instance.completed message) response: {"error": "nope"}')
    message_url = reverse("admin:status_webhooks_webhookmessage_change", args=[message.pk])
    assert message_url in page


def test_a_healthy_endpoint_shows_no_last_error(settings):
    with FakeEndpoint() as receiver:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
        endpoint = WebhookEndpointFactory(url=receiver.url)
        receiver.responses = [500, 200]
        record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
        delivery.deliver_due()
        WebhookMessage.objects.update(next_attempt_at=timezone.now())
        delivery.deliver_due()  # delivered: healthy again
    client = logged_in(make_operator())
    assert _column(client.get(reverse(ENDPOINTS)).content.decode(), "failing_column") == "-"
    url = reverse("admin:status_webhooks_webhookendpoint_change", args=[endpoint.pk])
    assert _field(client.get(url).content.decode(), "last_error") == "-"
