"""Throttling and caps (issue 12 item 5): per-key throttle with 429 + Retry-After, page
sizes capped (over the cap: 400, never a silent clamp - issue 39), list views without
payloads, bindings per event capped, 411 without Content-Length, JSON depth capped at
the parser, unexpected errors logged."""

from __future__ import annotations

import json
import logging

import pytest
from django.http import HttpRequest
from django.test import Client
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from tests.factories import PAYLOAD, TriggerInstanceFactory, WorkflowTriggerFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "query",
    ["limit=1e20", "limit=99999999999999999999", "offset=99999999999999999999", "limit=-1"],
)
def test_absurd_page_parameters_never_500(api, workflow, query):
    response = api.get(f"/api/v1/workflows/?{query}")
    assert response.status_code in (200, 400), response.content


@pytest.mark.parametrize("path", ["/api/v1/triggers/", "/api/v1/step-logs/"])
@pytest.mark.parametrize("size", ["99999999999999999999", "501", "0", "-1"])
def test_a_page_size_out_of_range_is_a_400_naming_it_never_clamped(api, workflow, path, size):
    TriggerInstanceFactory.create_batch(3, workflow=workflow)
    response = api.get(f"{path}?page_size={size}")
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == ("page_size", "invalid")
    assert "from 1 to 500" in response.json()["message"]
    assert api.get(f"{path}?page_size=500").status_code == 200


def test_workflow_page_is_capped(api, workflow):
    from api.pagination import MAX_PAGE_SIZE, WorkflowPages

    assert WorkflowPages.max_limit == MAX_PAGE_SIZE <= 500
    response = api.get("/api/v1/workflows/?limit=100000")
    assert (response.status_code, response.json()["field"]) == (400, "limit")
    assert api.get(f"/api/v1/workflows/?limit={MAX_PAGE_SIZE}").status_code == 200


def test_the_schema_gives_every_page_size_its_bounds(api):
    schema = api.get("/api/schema/?format=json", HTTP_ACCEPT="application/json").json()
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] in ("page_size", "limit"):
                    bounds = parameter["schema"].get("minimum"), parameter["schema"].get("maximum")
                    assert bounds == (1, 500), (path, parameter)


def test_trigger_list_leaves_payloads_out_unless_asked(
    api, workflow, django_assert_max_num_queries
):
    TriggerInstanceFactory.create_batch(3, workflow=workflow)
    with django_assert_max_num_queries(4):
        rows = api.get("/api/v1/triggers/").json()["results"]
    assert len(rows) == 3 and all("payload" not in row for row in rows)
    rows = api.get("/api/v1/triggers/?include_payload=true").json()["results"]
    assert all(row["payload"] == PAYLOAD for row in rows)


def test_throttle_lets_requests_through_when_its_redis_is_down(settings, workflow, caplog):
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    settings.NOTIFYFLOW_THROTTLE_RATE = "3/min"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{dead}/0",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    raw = api_key_create(name="during-outage")[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="notifyflow.throttling"):
        statuses = [
            api.post(
                "/api/v1/triggers/",
                {"workflow": workflow.key, "idempotency_key": f"k{i}", "payload": PAYLOAD},
                format="json",
            ).status_code
            for i in range(5)
        ]
    assert statuses == [201] * 5  # over the rate, but nothing can count: fail open
    assert time.monotonic() - started < 10
    assert "throttle cache unreachable" in caplog.text


def test_requests_over_the_rate_get_429_with_retry_after(settings, workflow):
    settings.NOTIFYFLOW_THROTTLE_RATE = "3/min"
    raw = api_key_create(name="noisy")[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    statuses = [api.get("/api/v1/workflows/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = api.get("/api/v1/workflows/")
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    # Per key: another key is not throttled.
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='quiet')[1]}")
    assert other.get("/api/v1/workflows/").status_code == 200


def test_bindings_per_event_are_capped(api, settings, workflow):
    settings.NOTIFYFLOW_MAX_BINDINGS_PER_EVENT = 2
    for _ in range(2):
        WorkflowTriggerFactory(workflow=workflow, event_name="SIGNUP")
    response = api.post(
        "/api/v1/workflow-triggers/",
        {"event_name": "SIGNUP", "workflow": workflow.key},
        format="json",
    )
    assert response.status_code == 409 and response.json()["code"] == "too_many_bindings"


def test_event_fan_out_is_bounded_even_for_stored_bindings(api, settings, workflow):
    for _ in range(3):
        WorkflowTriggerFactory(workflow=workflow, event_name="SIGNUP")
    settings.NOTIFYFLOW_MAX_BINDINGS_PER_EVENT = 2
    response = api.post("/api/v1/events/", {"name": "SIGNUP", "context": PAYLOAD}, format="json")
    assert len(response.json()["outcomes"]) == 2


def test_body_without_content_length_is_411(api_key, workflow):
    body = json.dumps({"workflow": workflow.key, "idempotency_key": "k", "payload": {}}).encode()
    response = Client().generic(
        "POST",
        "/api/v1/triggers/",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key}",
        CONTENT_LENGTH="",
    )
    assert response.status_code == 411
    assert response.json()["code"] == "length_required"


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [65, 930, 940, 5000])
def test_json_nested_deeper_than_64_is_400_at_the_parser(api, workflow, depth):
    payload = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    body = f'{{"workflow": "{workflow.key}", "idempotency_key": "deep", "payload": {payload}}}'
    response = api.post("/api/v1/triggers/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"


def test_json_at_the_depth_limit_is_accepted_and_its_pages_render(api, workflow, dispatched):
    from django.urls import reverse

    from tests.admin_helpers import PASSWORD, make_superuser

    body = {"workflow": workflow.key, "idempotency_key": "deep-ok", "payload": _nested(62)}
    response = api.post("/api/v1/triggers/", body, format="json")
    assert response.status_code == 201
    instance_id = response.json()["id"]
    assert api.get(f"/api/v1/triggers/{instance_id}/steps/").status_code == 200
    web = Client()
    assert web.login(request=HttpRequest(), username=make_superuser().username, password=PASSWORD)
    page = web.get(reverse("admin:triggers_triggerinstance_change", args=[instance_id]))
    assert page.status_code == 200


def test_unexpected_errors_are_logged_with_a_traceback(api, workflow, monkeypatch, caplog):
    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr("api.views.workflows.WorkflowDetailView.get", boom)
    api.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = api.get(f"/api/v1/workflows/{workflow.key}/")
    assert response.status_code == 500
    record = next(r for r in caplog.records if r.name == "django.request")
    assert record.exc_info and "kaboom" in str(record.exc_info[1])
