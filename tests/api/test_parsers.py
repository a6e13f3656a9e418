"""Numbers neither database can store (1e999, NaN, Infinity) and NUL characters, anywhere
in a JSON body, are a 400 naming the field on every endpoint; an unexpected error under
/api/ answers the error shape as JSON, never an HTML page."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.factories import WorkflowFactory
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db(transaction=True)

BODIES = [
    # (id, raw JSON, field named, code)
    ("overflowing exponent", '{"payload": {"n": 1e999}}', "payload.n", "invalid_number"),
    ("negative overflow", '{"payload": {"n": -1e400}}', "payload.n", "invalid_number"),
    ("NaN", '{"payload": {"list": [1, NaN]}}', "payload.list[1]", "invalid_number"),
    ("Infinity", '{"payload": {"a": {"b": Infinity}}}', "payload.a.b", "invalid_number"),
    ("-Infinity top level", '{"payload": {}, "x": -Infinity}', "x", "invalid_number"),
    ("NUL in a value", '{"payload": {"name": "a\\u0000b"}}', "payload.name", "nul_character"),
    ("NUL in a key", '{"payload": {"na\\u0000me": 1}}', "payload", "nul_character"),
]


def endpoints(workflow_key: str, binding_id: int, instance_id: str) -> list[tuple[str, str]]:
    return [
        ("POST", "/api/v1/triggers/"),
        ("POST", "/api/v1/triggers/cancel/"),
        ("POST", f"/api/v1/triggers/{instance_id}/cancel/"),
        ("POST", "/api/v1/events/"),
        ("POST", "/api/v1/workflows/"),
        ("PUT", f"/api/v1/workflows/{workflow_key}/"),
        ("POST", "/api/v1/workflow-triggers/"),
        ("PUT", f"/api/v1/workflow-triggers/{binding_id}/"),
        ("POST", f"/api/v1/workflow-triggers/{binding_id}/preview-key/"),
    ]


@pytest.mark.parametrize("raw,field,code", [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_unstorable_json_is_refused_naming_the_field_on_every_endpoint(api, raw, field, code):
    from triggers.models.events import WorkflowTrigger
    from triggers.services import trigger_create

    workflow = WorkflowFactory(key="limits")
    binding = WorkflowTrigger.objects.create(event_name="E", workflow=workflow)
    instance = trigger_create(workflow="limits", idempotency_key="k", payload={}).instance
    for method, url in endpoints(workflow.key, binding.pk, str(instance.pk)):
        response = api.generic(method, url, raw, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
        body = response.json()
        assert (body["field"], body["code"]) == (field, code), url
        assert field in body["message"]
    assert TriggerInstance.objects.count() == 1


def test_a_valid_trigger_with_large_finite_numbers_is_accepted(api, workflow):
    raw = (
        f'{{"workflow": "{workflow.key}", "idempotency_key": "big", '
        '"payload": {"n": 1.7e308, "m": -2.5e-300, "i": 123456789012345678901234567890}}'
    )
    response = api.generic("POST", "/api/v1/triggers/", raw, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["payload"]["n"] == 1.7e308


def test_an_unexpected_error_under_api_answers_json_not_html(api_key, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("api.views.triggers.trigger_create", explode)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    response = client.post(
        "/api/v1/triggers/",
        {"workflow": "x", "idempotency_key": "k", "payload": {}},
        format="json",
    )
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "server_error"


def test_an_unknown_api_path_answers_json_404(api):
    response = api.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
