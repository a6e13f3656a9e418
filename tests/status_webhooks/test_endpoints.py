"""Endpoint services: what may be saved (the allow-list, event types, workflows), the
secret shown once and rotated, enable, replay, and the audit row of every change."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from notifyflow.errors import ApplicationError, ConflictError
from status_webhooks import delivery
from status_webhooks.endpoints import (
    endpoint_create,
    endpoint_delete,
    endpoint_enable,
    endpoint_update,
    messages_replay,
    secret_rotate,
)
from status_webhooks.models import EndpointChange, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.factories import WorkflowFactory

pytestmark = [pytest.mark.django_db]
HOST = "hooks.example.com"


@pytest.fixture(autouse=True)
def allowed(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [HOST, "127.0.0.1:8080"]


def _create(**fields) -> WebhookEndpoint:
    fields.setdefault("url", f"https://{HOST}/notifyflow")
    fields.setdefault("event_types", ["instance.completed"])
    return endpoint_create(actor="api:tests", **fields)


def _refused(**fields) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        _create(**fields)
    return caught.value


def test_create_makes_a_secret_and_audits_who_did_it():
    endpoint = _create(description="billing", event_types=["delivery.*", "batch.closed"])
    assert endpoint.secret.startswith("whsec_") and endpoint.is_active
    change = EndpointChange.objects.get()
    assert (change.actor, change.action, change.endpoint) == ("api:tests", "created", endpoint)
    assert change.details["event_types"] == ["delivery.*", "batch.closed"]
    assert "secret" not in str(change.details) and endpoint.secret not in str(change.details)


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("https://evil.example.org/hook", "host_not_allowed"),
        (f"https://{HOST}:8443/hook", "host_not_allowed"),  # no port given: 80 and 443 only
        ("http://127.0.0.1:5432/", "host_not_allowed"),
        (f"ftp://{HOST}/hook", "invalid_url"),
        (f"https://user:pw@{HOST}/hook", "invalid_url"),
        (f"https://{HOST}/a b", "invalid_url"),
        (f"https://{HOST}:99999/", "invalid_url"),
        ("not a url", "invalid_url"),
    ],
)
def test_a_url_outside_the_allow_list_or_not_http_is_refused_at_save(url, code):
    error = _refused(url=url)
    assert (error.field, error.code) == ("url", code)
    assert not WebhookEndpoint.objects.exists()


def test_an_allowed_host_with_its_port_is_accepted():
    assert _create(url="http://127.0.0.1:8080/hook").url == "http://127.0.0.1:8080/hook"


def test_event_types_are_known_ones_or_the_delivery_family():
    error = _refused(event_types=["instance.completed", "instance.exploded"])
    assert (error.field, error.code) == ("event_types[1]", "unknown_event_type")
    assert _refused(event_types=[]).code == "required"
    endpoint = _create(event_types=["delivery.*", "delivery.*", "step.skipped"])
    assert endpoint.event_types == ["delivery.*", "step.skipped"]


def test_workflows_must_exist():
    WorkflowFactory(key="welcome")
    error = _refused(workflows=["welcome", "welcom"])
    assert (error.field, error.code) == ("workflows[1]", "unknown_workflow")
    assert _create(workflows=["welcome"]).workflows == ["welcome"]


def test_update_replaces_the_fields_keeps_the_secret_and_audits_what_changed():
    endpoint = _create(description="old")
    secret = endpoint.secret
    updated = endpoint_update(
        endpoint=endpoint,
        url=f"https://{HOST}/v2",
        event_types=["instance.failed"],
        actor="admin:ops",
    )
    assert updated.secret == secret and updated.description == ""
    change = EndpointChange.objects.get(action="updated")
    assert change.actor == "admin:ops"
    assert change.details == {
        "url": [f"https://{HOST}/notifyflow", f"https://{HOST}/v2"],
        "description": ["old", ""],
        "event_types": [["instance.completed"], ["instance.failed"]],
    }
    with pytest.raises(ApplicationError) as caught:
        endpoint_update(
            endpoint=endpoint, url="https://elsewhere.test/", event_types=["x"], actor="a"
        )
    assert caught.value.field == "url"


def test_an_update_that_changes_nothing_writes_no_audit_row():
    endpoint = _create()
    endpoint_update(
        endpoint=endpoint, url=endpoint.url, event_types=endpoint.event_types, actor="a"
    )
    assert not EndpointChange.objects.filter(action="updated").exists()


def test_rotation_gives_a_new_secret_and_keeps_the_old_one_signing_for_a_day():
    endpoint = _create()
    old = endpoint.secret
    rotated = secret_rotate(endpoint=endpoint, actor="api:tests")
    assert rotated.secret != old and rotated.previous_secret == old
    now = timezone.now()
    assert rotated.previous_secret_expires_at is not None
    assert (
        timedelta(hours=23, minutes=59)
        < rotated.previous_secret_expires_at - now
        <= timedelta(hours=24)
    )
    assert delivery.signing_secrets(rotated, now=now) == [rotated.secret, old]
    assert delivery.signing_secrets(rotated, now=now + timedelta(days=1, seconds=1)) == [
        rotated.secret
    ]
    assert EndpointChange.objects.filter(action="secret_rotated").count() == 1


def test_enable_clears_the_failure_record_once():
    endpoint = _create()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        is_active=False,
        failing_since=timezone.now() - timedelta(days=6),
        disabled_at=timezone.now(),
        disabled_reason="every attempt failed for 5 days",
    )
    enabled = endpoint_enable(endpoint=endpoint, actor="admin:ops")
    assert enabled.is_active and enabled.failing_since is None and enabled.disabled_at is None
    assert enabled.disabled_reason == ""
    endpoint_enable(endpoint=enabled, actor="admin:ops")
    assert EndpointChange.objects.filter(action="enabled").count() == 1


def test_delete_removes_messages_and_keeps_the_audit_trail():
    endpoint = _create()
    record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
    endpoint_delete(endpoint=endpoint, actor="api:tests")
    assert not WebhookEndpoint.objects.exists() and not WebhookMessage.objects.exists()
    trail = list(EndpointChange.objects.order_by("at").values_list("action", "endpoint_url"))
    assert trail == [("created", endpoint.url), ("deleted", endpoint.url)]
    assert EndpointChange.objects.filter(endpoint__isnull=True).count() == 2


@pytest.mark.both_databases
def test_replay_requeues_the_range_with_the_same_ids_and_a_fresh_schedule():
    endpoint = _create()
    other = _create()
    start = timezone.now()
    for hours in (0, 1, 2):
        record(
            events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())],
            at=start + timedelta(hours=hours),
        )
    WebhookMessage.objects.update(
        status="delivered", attempts=3, delivered_at=start, next_attempt_at=start
    )
    ids = {
        m.event_id
        for m in WebhookMessage.objects.filter(
            endpoint=endpoint, created_at__lt=start + timedelta(hours=2)
        )
    }
    count = messages_replay(
        endpoint=endpoint, since=start, until=start + timedelta(hours=2), actor="api:tests"
    )
    assert count == 2
    again = WebhookMessage.objects.filter(status="pending")
    assert {m.event_id for m in again} == ids
    assert all(m.endpoint == endpoint and m.attempts == 0 for m in again)
    assert all(m.next_attempt_at >= start and m.delivered_at is None for m in again)
    assert WebhookMessage.objects.filter(endpoint=other, status="delivered").count() == 3
    change = EndpointChange.objects.get(action="replayed")
    assert change.details["messages"] == 2 and change.actor == "api:tests"
    assert messages_replay(endpoint=endpoint, since=start + timedelta(days=1), actor="a") == 0


def test_replay_of_a_disabled_endpoint_is_a_conflict():
    endpoint = _create(is_active=False)
    with pytest.raises(ConflictError) as caught:
        messages_replay(endpoint=endpoint, since=timezone.now(), actor="a")
    assert caught.value.code == "endpoint_disabled"
