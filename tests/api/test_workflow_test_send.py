"""POST /api/v1/workflows/{key}/test/ (a test send: a real instance marked test) and
POST /api/v1/workflows/{key}/preview/ for a chosen recipient."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from tests.factories import RecipientFactory, WorkflowFactory
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db


def keyed(scope: str, workflows: tuple[str, ...] = ()) -> APIClient:
    raw = api_key_create(name=f"{scope}-{len(workflows)}", scope=scope, workflows=workflows)[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_test_send_starts_an_instance_marked_test(api, dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada")

    response = api.post(
        f"/api/v1/workflows/{workflow.key}/test/",
        {"recipient_id": "ada", "payload": {"name": "Ada"}},
        format="json",
    )

    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["test"] is True and body["recipient"] == "ada"
    assert body["idempotency_key"].startswith("test:")
    assert TriggerInstance.objects.get(pk=body["id"]).is_test
    assert [instance_id for instance_id, _ in dispatched] == [body["id"]]
    assert api.get(f"/api/v1/triggers/{body['id']}/").json()["test"] is True


def test_test_send_to_an_unknown_recipient_is_404_and_creates_nothing(api):
    workflow = WorkflowFactory()
    response = api.post(
        f"/api/v1/workflows/{workflow.key}/test/",
        {"recipient_id": "nobody", "payload": {}},
        format="json",
    )
    assert response.status_code == 404
    assert response.json()["field"] == "recipient_id"
    assert not TriggerInstance.objects.exists()


def test_test_send_validates_its_body(api):
    workflow = WorkflowFactory()
    response = api.post(f"/api/v1/workflows/{workflow.key}/test/", {"payload": []}, format="json")
    assert response.status_code == 400
    fields = {(e["field"], e["code"]) for e in response.json()["errors"]}
    assert fields == {("recipient_id", "required"), ("payload", "not_an_object")}


def test_test_send_takes_a_locale(api, dispatched):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada", locale="en")

    response = api.post(
        f"/api/v1/workflows/{workflow.key}/test/",
        {"recipient_id": "ada", "payload": {}, "locale": "pt-BR"},
        format="json",
    )

    assert response.status_code == 202, response.json()
    assert TriggerInstance.objects.get(pk=response.json()["id"]).locale == "pt-BR"


@pytest.mark.parametrize(
    ("locale", "code"),
    [
        ("klingon", "invalid_locale"),
        ("pt_BR", "invalid_locale"),
        (7, "invalid"),
        ("x" * 36, "too_long"),
    ],
)
def test_test_send_with_a_bad_locale_is_400_naming_it(api, locale, code):
    workflow = WorkflowFactory()
    RecipientFactory(id="ada")

    response = api.post(
        f"/api/v1/workflows/{workflow.key}/test/",
        {"recipient_id": "ada", "payload": {}, "locale": locale},
        format="json",
    )

    assert response.status_code == 400
    assert [(e["field"], e["code"]) for e in response.json()["errors"]] == [("locale", code)]
    assert not TriggerInstance.objects.exists()


def test_test_send_needs_a_trigger_key_for_the_workflow(dispatched):
    workflow = WorkflowFactory(key="allowed")
    other = WorkflowFactory(key="other")
    RecipientFactory(id="ada")
    body = {"recipient_id": "ada", "payload": {}}

    reader = keyed("read").post(f"/api/v1/workflows/{workflow.key}/test/", body, format="json")
    assert reader.status_code == 403

    limited = keyed("trigger", ("allowed",))
    assert (
        limited.post(f"/api/v1/workflows/{other.key}/test/", body, format="json").status_code == 403
    )
    allowed = limited.post(f"/api/v1/workflows/{workflow.key}/test/", body, format="json")
    assert allowed.status_code == 202, allowed.json()


def test_preview_for_a_recipient_names_what_each_node_would_do(api):
    workflow = WorkflowFactory()
    RecipientFactory(id="bo", preferences={"channels": {"sms": False}})

    response = api.post(
        f"/api/v1/workflows/{workflow.key}/preview/",
        {
            "payload": {"email": "b@example.com", "phone": "+15550000002", "name": "Bo"},
            "recipient_id": "bo",
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["recipient"]["id"] == "bo"
    outcomes = {node["node_id"]: node["recipient"] for node in body["nodes"]}
    assert outcomes["hello"]["would_send"] is True
    assert outcomes["text"] == {
        "would_send": False,
        "skip_reason": "preference_opt_out",
        "rule": "channels.sms",
    }


def test_preview_for_an_unknown_recipient_is_404(api):
    workflow = WorkflowFactory()
    response = api.post(
        f"/api/v1/workflows/{workflow.key}/preview/",
        {"payload": {}, "recipient_id": "nobody"},
        format="json",
    )
    assert response.status_code == 404
    assert response.json()["field"] == "recipient_id"
