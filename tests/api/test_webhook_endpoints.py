"""/api/v1/webhook-endpoints/: CRUD with the secret shown once, rotate, replay, and an
endpoint's messages with their attempts; admin keys only; 4xx naming the field."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from status_webhooks import delivery
from status_webhooks.models import EndpointChange, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.fake_http import FakeEndpoint

URL = "/api/v1/webhook-endpoints/"
HOST = "hooks.example.com"
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def allowed(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [HOST]


def _create(api, **fields):
    body = {"url": f"https://{HOST}/in", "event_types": ["instance.completed"], **fields}
    return api.post(URL, body, format="json")


def _client(**key) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='k', **key)[1]}")
    return client


def test_post_answers_the_secret_once_and_get_never(api):
    response = _create(api, description="billing", event_types=["delivery.*"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["secret"].startswith("whsec_")
    assert body["event_types"] == ["delivery.*"] and body["workflows"] == []
    assert body["is_active"] is True and body["description"] == "billing"
    detail = api.get(f"{URL}{body['id']}/").json()
    listed = api.get(URL).json()["results"]
    assert "secret" not in detail and all("secret" not in e for e in listed)
    assert body["secret"] not in str(detail) + str(listed)
    change = EndpointChange.objects.get()
    assert change.actor == "api:tests" and change.action == "created"


@pytest.mark.parametrize(
    ("fields", "field", "code"),
    [
        ({"url": "https://elsewhere.example.org/in"}, "url", "host_not_allowed"),
        ({"url": "gopher://hooks.example.com/"}, "url", "invalid_url"),
        ({"url": 12}, "url", "required"),
        ({"event_types": ["instance.exploded"]}, "event_types.0", "invalid_choice"),
        ({"event_types": []}, "event_types", "min_length"),
        ({"event_types": "instance.completed"}, "event_types", "not_a_list"),
        ({"workflows": ["nope"]}, "workflows[0]", "unknown_workflow"),
        ({"is_active": "yes"}, "is_active", "invalid"),
        ({"secret": "whsec_mine"}, "secret", "unknown_field"),
    ],
)
def test_an_invalid_endpoint_is_a_400_naming_the_field(api, fields, field, code):
    response = _create(api, **fields)
    assert response.status_code == 400, response.json()
    assert (response.json()["field"], response.json()["code"]) == (field, code)
    assert not WebhookEndpoint.objects.exists()


def test_put_replaces_and_keeps_the_secret_delete_answers_204(api, workflow):
    created = _create(api, description="x").json()
    response = api.put(
        f"{URL}{created['id']}/",
        {
            "url": f"https://{HOST}/v2",
            "event_types": ["instance.failed", "batch.closed"],
            "workflows": [workflow.key],
            "is_active": False,
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["url"] == f"https://{HOST}/v2" and body["workflows"] == [workflow.key]
    assert body["description"] == "" and body["is_active"] is False
    assert WebhookEndpoint.objects.get().secret == created["secret"]
    assert api.delete(f"{URL}{created['id']}/").status_code == 204
    assert api.get(f"{URL}{created['id']}/").status_code == 404
    assert api.delete(f"{URL}{uuid.uuid4()}/").json()["code"] == "not_found"


def test_rotate_secret_answers_the_new_secret_once(api):
    created = _create(api).json()
    response = api.post(f"{URL}{created['id']}/rotate-secret/")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["secret"] != created["secret"] and body["secret"].startswith("whsec_")
    assert body["previous_secret_expires_at"] is not None
    assert "secret" not in api.get(f"{URL}{created['id']}/").json()
    refused = api.post(f"{URL}{created['id']}/rotate-secret/", {"x": 1}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_field"


def test_replay_requeues_the_range_and_says_how_many(api):
    created = _create(api).json()
    start = timezone.now() - timedelta(hours=3)
    for hours in (0, 1, 2):
        record(
            events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())],
            at=start + timedelta(hours=hours),
        )
    WebhookMessage.objects.update(status="failed", attempts=8)
    response = api.post(
        f"{URL}{created['id']}/replay/",
        {"since": (start + timedelta(minutes=30)).isoformat()},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"replayed": 2}
    assert WebhookMessage.objects.filter(status="pending", attempts=0).count() == 2
    bad = api.post(f"{URL}{created['id']}/replay/", {"since": "yesterday"}, format="json")
    assert (bad.status_code, bad.json()["field"]) == (400, "since")
    missing = api.post(f"{URL}{created['id']}/replay/", {}, format="json")
    assert (missing.status_code, missing.json()["field"]) == (400, "since")


@pytest.mark.parametrize("until_offset", [timedelta(seconds=-1), timedelta(days=-1)])
def test_a_replay_until_before_since_is_a_400_naming_until(api, until_offset):
    created = _create(api).json()
    record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
    since = timezone.now() - timedelta(hours=1)
    body = {"since": since.isoformat(), "until": (since + until_offset).isoformat()}
    response = api.post(f"{URL}{created['id']}/replay/", body, format="json")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == ("until", "invalid_range")
    # An empty range [since, since) is a question with the answer 0, not a mistake.
    empty = {"since": since.isoformat(), "until": since.isoformat()}
    answered = api.post(f"{URL}{created['id']}/replay/", empty, format="json")
    assert answered.json() == {"replayed": 0}


def test_replay_of_a_disabled_endpoint_is_409(api):
    created = _create(api, is_active=False).json()
    response = api.post(
        f"{URL}{created['id']}/replay/", {"since": timezone.now().isoformat()}, format="json"
    )
    assert response.status_code == 409 and response.json()["code"] == "endpoint_disabled"


def test_messages_are_listed_newest_first_with_their_attempts_and_filters(api, settings):
    with FakeEndpoint() as receiver:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
        created = _create(
            api, url=receiver.url, event_types=["instance.completed", "instance.failed"]
        ).json()
        receiver.responses = [500]
        record(events=[NewEvent(type="instance.completed", instance_id=uuid.uuid4())])
        record(events=[NewEvent(type="instance.failed", instance_id=uuid.uuid4())])
        delivery.deliver_due()
    url = f"{URL}{created['id']}/messages/"
    results = api.get(url).json()["results"]
    assert [m["type"] for m in results] == ["instance.failed", "instance.completed"]
    statuses = {
        m["type"]: (m["status"], [a["status_code"] for a in m["attempts"]]) for m in results
    }
    assert sorted(statuses.values()) == [("delivered", [200]), ("pending", [500])]
    pending = api.get(url, {"status": "pending"}).json()["results"]
    assert len(pending) == 1 and pending[0]["attempt_count"] == 1
    assert pending[0]["attempts"][0]["response_excerpt"] == '{"error": "nope"}'
    assert [m["type"] for m in api.get(url, {"type": "instance.failed"}).json()["results"]] == [
        "instance.failed"
    ]
    assert api.get(url, {"status": "lost"}).json()["field"] == "status"
    assert api.get(url, {"cursor": "zzz"}).json()["code"] == "invalid_cursor"
    assert api.get(f"{URL}{uuid.uuid4()}/messages/").status_code == 404


@pytest.mark.parametrize("scope", ["read", "trigger"])
def test_only_admin_keys_reach_endpoints(scope):
    client = _client(scope=scope)
    assert client.get(URL).status_code == 403
    assert _create(client).status_code == 403


def test_a_key_limited_to_workflows_may_not_manage_endpoints(workflow):
    client = _client(scope="admin", workflows=[workflow.key])
    response = client.get(URL)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
