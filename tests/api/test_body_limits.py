"""Every endpoint has one body limit, and above it the answer is 413
``payload_too_large`` naming it (issue 39 item 4): never an opaque 400 because Django's
DATA_UPLOAD_MAX_MEMORY_SIZE cut in first. A 378 KB triggers/bulk/ body (1,000 items of
300-byte payloads) or a 349 KB recipients/bulk/ body was a 400 ``bad_request``; the
bulk endpoints take NOTIFYFLOW_MAX_BULK_BODY_BYTES (16 MiB), every other API endpoint
NOTIFYFLOW_MAX_BODY_BYTES, the rest of the site DATA_UPLOAD_MAX_MEMORY_SIZE."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import RequestDataTooBig
from django.urls import URLPattern, URLResolver, get_resolver

from api.errors import exception_handler
from recipients.models import Recipient
from recipients.unsubscribe import token_for
from tests.factories import RecipientFactory, WorkflowFactory
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

BULK_LIMIT = 16 * 1024 * 1024


def padded(document: dict, size: int) -> str:
    """``document`` as JSON of exactly ``size`` bytes (trailing whitespace is JSON)."""
    text = json.dumps(document)
    assert len(text.encode()) <= size
    return text + " " * (size - len(text.encode()))


def post(api, url: str, body: str, method: str = "POST"):
    return api.generic(method, url, body, content_type="application/json")


def assert_too_large(response, limit: int, setting: str) -> None:
    assert response.status_code == 413, response.content
    body = response.json()
    assert (body["code"], body["field"]) == ("payload_too_large", "body")
    assert f"limit of {limit} bytes ({setting})" in body["message"]


# --- the bulk endpoints, at their real default limit -----------------------------------


def test_a_378_kb_trigger_bulk_is_accepted_at_the_default_limits(api):
    assert django_settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES == BULK_LIMIT
    workflow = WorkflowFactory()
    items = [
        {"workflow": workflow.key, "idempotency_key": f"k{i}", "payload": {"x": "y" * 300}}
        for i in range(1000)
    ]
    body = json.dumps({"items": items})
    assert len(body) > 370_000 > django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = post(api, "/api/v1/triggers/bulk/", body)
    assert response.status_code == 200, response.content[:300]
    assert {r["status"] for r in response.json()["results"]} == {"created"}
    assert TriggerInstance.objects.count() == 1000


def test_a_349_kb_recipient_bulk_is_accepted_at_the_default_limits(api):
    items = [{"id": f"user-{i}", "properties": {"bio": "b" * 300}} for i in range(1000)]
    body = json.dumps({"items": items})
    assert len(body) > 340_000 > django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = post(api, "/api/v1/recipients/bulk/", body)
    assert response.status_code == 200, response.content[:300]
    assert Recipient.objects.count() == 1000


@pytest.mark.parametrize("url", ["/api/v1/triggers/bulk/", "/api/v1/recipients/bulk/"])
def test_the_default_bulk_limit_is_16_mib_to_the_byte(api, url):
    workflow = WorkflowFactory()
    if "triggers" in url:
        items = [{"workflow": workflow.key, "idempotency_key": "k", "payload": {}}]
    else:
        items = [{"id": "ada"}]
    for size in (BULK_LIMIT - 1, BULK_LIMIT):
        assert post(api, url, padded({"items": items}, size)).status_code == 200
    assert_too_large(
        post(api, url, padded({"items": items}, BULK_LIMIT + 1)),
        BULK_LIMIT,
        "NOTIFYFLOW_MAX_BULK_BODY_BYTES",
    )


@pytest.mark.parametrize("url", ["/api/v1/triggers/bulk/", "/api/v1/recipients/bulk/"])
def test_a_smaller_bulk_limit_is_held_to_the_byte(api, settings, url):
    settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES = 2000
    workflow = WorkflowFactory()
    if "triggers" in url:
        items = [{"workflow": workflow.key, "idempotency_key": "k", "payload": {}}]
    else:
        items = [{"id": "ada"}]
    for size in (1999, 2000):
        assert post(api, url, padded({"items": items}, size)).status_code == 200
    too_large = post(api, url, padded({"items": items}, 2001))
    assert_too_large(too_large, 2000, "NOTIFYFLOW_MAX_BULK_BODY_BYTES")


# --- every other API endpoint ----------------------------------------------------------


def test_a_trigger_body_is_held_to_the_body_limit_to_the_byte(api, settings):
    settings.NOTIFYFLOW_MAX_BODY_BYTES = 1000
    workflow = WorkflowFactory()
    for index, size in enumerate((999, 1000)):
        document = {"workflow": workflow.key, "idempotency_key": f"k{index}", "payload": {}}
        assert post(api, "/api/v1/triggers/", padded(document, size)).status_code == 201
    document = {"workflow": workflow.key, "idempotency_key": "k2", "payload": {}}
    response = post(api, "/api/v1/triggers/", padded(document, 1001))
    assert_too_large(response, 1000, "NOTIFYFLOW_MAX_BODY_BYTES")
    assert TriggerInstance.objects.count() == 2


def test_the_default_body_limit_follows_the_payload_limit():
    assert django_settings.NOTIFYFLOW_MAX_BODY_BYTES == (
        django_settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES + 16 * 1024
    )


def _routes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and (prefix + str(pattern.pattern)).startswith(
            "api/v1/"
        ):
            yield prefix + str(pattern.pattern), pattern.callback.cls


_VALUES = {"uuid": str(uuid.uuid4()), "int": "1", "slug": "some-key", "str": "some-id"}


def _url(route: str) -> str:
    return "/" + re.sub(r"<(\w+):\w+>", lambda m: _VALUES[m.group(1)], route)


def _every_operation() -> list[tuple[str, str, str]]:
    operations = []
    for route, view in _routes(get_resolver().url_patterns):
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(view, method):
                operations.append((method.upper(), _url(route), view.body_limit))
    return operations


def test_every_api_endpoint_has_one_of_the_two_documented_limits():
    limits = {(url, limit) for _, url, limit in _every_operation()}
    assert {limit for _, limit in limits} == {
        "NOTIFYFLOW_MAX_BODY_BYTES",
        "NOTIFYFLOW_MAX_BULK_BODY_BYTES",
    }
    assert {url for url, limit in limits if limit == "NOTIFYFLOW_MAX_BULK_BODY_BYTES"} == {
        "/api/v1/triggers/bulk/",
        "/api/v1/recipients/bulk/",
        "/api/v1/workflows/sync/",
    }


def test_over_its_limit_every_api_operation_answers_413_unread(api, settings):
    settings.NOTIFYFLOW_MAX_BODY_BYTES = 500
    settings.NOTIFYFLOW_MAX_BULK_BODY_BYTES = 700
    operations = _every_operation()
    assert len(operations) > 40
    for method, url, setting in operations:
        limit = getattr(settings, setting)
        # Not even JSON: refused on its declared size before anything reads it.
        response = post(api, url, "x" * (limit + 1), method=method)
        assert response.status_code == 413, (method, url, response.content)
        assert_too_large(response, limit, setting)


# --- what is not the API: Django's limit, answered 413 too -----------------------------


def test_the_unsubscribe_page_over_django_s_limit_is_413_not_400(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    person = RecipientFactory()
    token = token_for(recipient_id=person.pk, scope="workflows.welcome")
    response = client.post(
        f"/u/{token}/",
        "List-Unsubscribe=One-Click&x=" + "a" * 2000,
        "application/x-www-form-urlencoded",
    )
    assert response.status_code == 413, response.content
    assert b"1000 bytes" in response.content


def test_django_s_limit_met_inside_an_api_view_is_413_in_the_error_shape():
    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response is not None and response.status_code == 413
    assert (response.data["code"], response.data["field"]) == ("payload_too_large", "body")
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.data["message"]
