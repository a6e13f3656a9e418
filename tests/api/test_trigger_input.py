"""Every bad input gets a 4xx JSON error naming the field with a stable code, and
writes nothing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db
URL = "/api/v1/triggers/"


@pytest.fixture
def inactive(db):
    from tests.factories import WorkflowFactory

    return WorkflowFactory(key="dormant", is_active=False)


def raw_post(api, body: str, content_type: str = "application/json"):
    return api.generic("POST", URL, body, content_type=content_type)


CASES = [
    # (id, body, content type, status, field, code)
    ("malformed json", '{"workflow": ', "application/json", 400, "body", "malformed_json"),
    (
        "wrong content type",
        "workflow=x",
        "application/x-www-form-urlencoded",
        415,
        "Content-Type",
        "unsupported_media_type",
    ),
    ("body is a list", "[1, 2]", "application/json", 400, "body", "not_an_object"),
    ("payload not an object", {"payload": [1]}, None, 400, "payload", "not_an_object"),
    ("payload a string", {"payload": "x"}, None, 400, "payload", "not_an_object"),
    ("key missing", {"idempotency_key": None}, None, 400, "idempotency_key", "required"),
    ("key empty", {"idempotency_key": ""}, None, 400, "idempotency_key", "required"),
    ("key blank", {"idempotency_key": "   "}, None, 400, "idempotency_key", "required"),
    ("key not a string", {"idempotency_key": 12}, None, 400, "idempotency_key", "required"),
    ("key too long", {"idempotency_key": "k" * 256}, None, 400, "idempotency_key", "too_long"),
    ("workflow missing", {"workflow": None}, None, 400, "workflow", "required"),
    ("workflow unknown", {"workflow": "nope"}, None, 400, "workflow", "unknown_workflow"),
    ("workflow inactive", {"workflow": "dormant"}, None, 400, "workflow", "inactive_workflow"),
    (
        "payload over 256 KiB",
        {"payload": {"blob": "x" * (256 * 1024)}},
        None,
        413,
        "payload",
        "payload_too_large",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_4xx_naming_the_field(api, workflow, inactive, case):
    _, body, content_type, status, field, code = case
    if content_type is None:
        full = {"workflow": workflow.key, "idempotency_key": "k", "payload": {}}
        full.update(body)
        full = {k: v for k, v in full.items() if v is not None}
        response = raw_post(api, json.dumps(full))
    else:
        response = raw_post(api, body, content_type)
    assert response.status_code == status, response.content
    error = response.json()
    assert (error["field"], error["code"]) == (field, code)
    assert field in error["message"]
    assert error["errors"][0]["field"] == field
    assert TriggerInstance.objects.count() == 0


def test_a_huge_body_is_refused_before_parsing(api, workflow):
    body = json.dumps(
        {"workflow": workflow.key, "idempotency_key": "k", "payload": {"blob": "x" * (400 * 1024)}}
    )
    response = raw_post(api, body)
    assert response.status_code == 413 and response.json()["field"] == "body"
    assert TriggerInstance.objects.count() == 0


def test_payload_exactly_at_the_limit_is_accepted(api, workflow, settings):
    settings.NOTIFYFLOW_MAX_PAYLOAD_BYTES = 1000
    payload = {"b": "x" * (1000 - len('{"b":""}'))}
    ok = raw_post(
        api, json.dumps({"workflow": workflow.key, "idempotency_key": "k", "payload": payload})
    )
    assert ok.status_code == 201
    payload["b"] += "x"
    too_big = raw_post(
        api, json.dumps({"workflow": workflow.key, "idempotency_key": "k2", "payload": payload})
    )
    assert too_big.status_code == 413


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope", "Token abc", "Basic x"])
def test_missing_or_bad_auth_is_401(workflow, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post(
        URL, {"workflow": workflow.key, "idempotency_key": "k", "payload": {}}, format="json"
    )
    assert response.status_code == 401
    assert response.json()["field"] == "Authorization"
    assert response.json()["code"] in {"not_authenticated", "authentication_failed"}
    assert TriggerInstance.objects.count() == 0


def test_unknown_fields_in_payload_are_kept_but_bad_top_level_types_fail(api, workflow):
    response = raw_post(api, json.dumps({"workflow": ["x"], "idempotency_key": "k", "payload": {}}))
    assert response.status_code == 400 and response.json()["field"] == "workflow"


def test_deeply_nested_json_is_a_400_not_a_500(api, workflow):
    body = '{"workflow": "x", "idempotency_key": "k", "payload": ' + "[" * 5000 + "]" * 5000 + "}"
    response = raw_post(api, body)
    assert response.status_code == 400 and response.json()["code"] == "malformed_json"
    assert TriggerInstance.objects.count() == 0
