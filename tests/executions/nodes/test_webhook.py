"""The webhook node against a local HTTP server: a signed, templated JSON body; 503
retried, 400 permanent; the host allow-list enforced at send (and by the API at save;
the rule itself: tests/workflows/definition/test_webhooks.py)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from django.utils import timezone

from executions import engine
from executions.models import Delivery, DeliveryAttempt
from executions.outcomes import StepOutcome
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fake_http import FakeEndpoint
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]
SECRET = "whsec-test"


def webhook_definition(url: str, **config) -> dict:
    return {
        "entry_node_id": "call",
        "nodes": [
            {
                "id": "call",
                "type": "webhook",
                "config": {
                    "url": url,
                    "body": {"user": "{{ payload.name }}", "plan": "pro", "n": 3},
                    "headers": {"X-Tenant": "t-{{ payload.name }}"},
                    **config,
                },
            }
        ],
        "edges": [],
    }


@pytest.fixture
def endpoint(settings):
    settings.NOTIFYFLOW_WEBHOOK_SECRET = SECRET
    with FakeEndpoint() as fake:
        # The fake listens on a random port: allowed by name (a bare host allows 80/443).
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [fake.url.removeprefix("http://")]
        yield fake


def run(instance) -> str:
    TriggerInstance.objects.filter(pk=instance.pk).update(available_at=timezone.now())
    return engine.step_execute(instance_id=instance.pk)


def test_signed_templated_body_reaches_the_endpoint(endpoint, dispatched):
    workflow = WorkflowFactory(
        definition=webhook_definition(endpoint.url + "/hooks/{{ payload.name }}")
    )
    instance = TriggerInstanceFactory(workflow=workflow)
    assert run(instance) == StepOutcome.COMPLETED
    [(method, path, headers, raw)] = endpoint.received
    assert (method, path) == ("POST", "/hooks/Ada")
    assert json.loads(raw) == {"user": "Ada", "plan": "pro", "n": 3}
    assert headers["X-Tenant"] == "t-Ada"
    assert headers["X-NotifyFlow-Delivery"] == f"{instance.pk}:call"
    # The receiver's side of the contract: recompute the HMAC over "<t>.<raw body>".
    parts = dict(item.split("=", 1) for item in headers["X-NotifyFlow-Signature"].split(","))
    expected = hmac.new(SECRET.encode(), f"{parts['t']}.".encode() + raw, hashlib.sha256)
    assert hmac.compare_digest(parts["v1"], expected.hexdigest())
    assert abs(int(parts["t"]) - timezone.now().timestamp()) < 60
    instance.refresh_from_db()
    assert instance.vars["webhook_call"] == {"status": 200, "body": '{"ok": true}'}
    assert Delivery.objects.get(instance=instance).channel == "webhook"


def test_503_is_retried_then_succeeds_and_is_never_sent_again(endpoint, dispatched):
    endpoint.responses = [503]
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url, method="PUT"))
    )
    assert run(instance) == StepOutcome.FAILED_TRANSIENT
    instance.refresh_from_db()
    assert (instance.status, instance.attempts) == (TriggerStatus.ENQUEUED, 1)
    assert "webhook 503" in instance.last_error
    assert run(instance) == StepOutcome.COMPLETED
    assert [r[0] for r in endpoint.received] == ["PUT", "PUT"]
    # Same delivery id on the retry, so the receiver can deduplicate.
    assert len({r[2]["X-NotifyFlow-Delivery"] for r in endpoint.received}) == 1
    assert list(
        DeliveryAttempt.objects.filter(delivery__instance=instance).values_list(
            "attempt", "provider", "outcome"
        )
    ) == [(1, "127.0.0.1", "transient"), (2, "127.0.0.1", "sent")]
    # A redelivered message for the same node: the guard answers, no request.
    TriggerInstance.objects.filter(pk=instance.pk).update(
        status=TriggerStatus.ENQUEUED, current_node_id="call"
    )
    assert run(instance) == StepOutcome.COMPLETED
    assert len(endpoint.received) == 2


def test_400_is_permanent(endpoint, dispatched):
    endpoint.responses = [400]
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url))
    )
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED and "webhook 400" in instance.last_error
    assert len(endpoint.received) == 1


def test_host_outside_the_allow_list_is_refused_at_send(endpoint, settings, dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url))
    )
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]  # changed since save
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert "not allowed by NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS" in instance.last_error
    assert endpoint.received == []


def test_api_refuses_a_disallowed_host(api, settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    body = {"key": "w", "name": "w", "definition": webhook_definition("https://169.254.169.254/")}
    response = api.post("/api/v1/workflows/", body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "host_not_allowed"
    body["definition"] = webhook_definition("https://hooks.example.com/x")
    assert api.post("/api/v1/workflows/", body, format="json").status_code == 201


def test_the_port_is_checked_again_at_send(endpoint, settings, dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url))
    )
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the host, not its port
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert "port" in instance.last_error
    assert endpoint.received == []


@pytest.mark.parametrize("bad", ["a\r\nX-Injected: 1", "a\nb", "a\tb"])
def test_a_control_character_rendered_into_the_url_is_permanent(endpoint, dispatched, bad):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url + "/{{ payload.p }}")),
        payload={"name": "Ada", "p": bad},
    )
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "control character" in instance.last_error
    assert endpoint.received == []


def test_crlf_rendered_into_a_header_is_permanent(endpoint, dispatched):
    instance = TriggerInstanceFactory(
        workflow=WorkflowFactory(definition=webhook_definition(endpoint.url)),
        payload={"name": "a\r\nX-Injected: 1"},
    )
    assert run(instance) == StepOutcome.FAILED_PERMANENT
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.FAILED
    assert "request invalid" in instance.last_error
    assert endpoint.received == []
