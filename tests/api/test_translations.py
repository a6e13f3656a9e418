"""/api/v1/translations/: PUT replaces a catalogue, GET reads it (404 never written),
the list counts keys; bad bodies are 400 naming the field; scopes apply."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create

pytestmark = pytest.mark.django_db

URL = "/api/v1/translations/pt-BR/welcome/"


def client(scope: str, workflows: tuple[str, ...] = ()) -> APIClient:
    raw = api_key_create(name=f"{scope}-{len(workflows)}", scope=scope, workflows=workflows)[1]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def test_put_creates_then_replaces_and_get_reads_it(api):
    first = api.put(URL, {"messages": {"a": {"b": "B", "c": "C"}}}, format="json")
    assert first.status_code == 201
    second = api.put(URL, {"messages": {"d": "D"}}, format="json")
    assert second.status_code == 200
    body = api.get(URL).json()
    assert body["messages"] == {"d": "D"}
    assert (body["locale"], body["namespace"], body["updated_by"]) == (
        "pt-BR",
        "welcome",
        "api:tests",
    )


def test_get_of_a_catalogue_never_written_is_404_with_a_stable_code(api):
    response = api.get(URL)
    assert response.status_code == 404
    assert response.json()["code"] == "translation_not_found"


def test_list_shows_locale_namespace_and_key_count(api):
    api.put(URL, {"messages": {"a": {"b": "B", "n": {"one": "1", "other": "n"}}}}, format="json")
    api.put("/api/v1/translations/en/common/", {"messages": {"x": "X"}}, format="json")
    rows = api.get("/api/v1/translations/").json()["results"]
    assert [(r["namespace"], r["locale"], r["keys"]) for r in rows] == [
        ("common", "en", 1),
        ("welcome", "pt-BR", 2),
    ]


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"messages": {"a": {"b": 1}}}, "messages.a.b", "invalid_messages"),
        ({"messages": "text"}, "messages", "not_an_object"),
        ({}, "messages", "required"),
        ({"messages": {}, "extra": 1}, "extra", "unknown_field"),
    ],
)
def test_bad_body_is_400_naming_the_field(api, body, field, code):
    response = api.put(URL, body, format="json")
    assert response.status_code == 400
    error = response.json()
    assert (error["field"], error["code"]) == (field, code)


def test_bad_locale_or_namespace_is_400(api):
    assert api.get("/api/v1/translations/klingon/welcome/").json()["code"] == ("invalid_locale")
    response = api.put("/api/v1/translations/en/bad.dot/", {"messages": {}}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_namespace")


def test_any_workflow_key_is_a_namespace_capitals_and_underscores_too(api):
    # A workflow key is a SlugField: Billing_EU is one, so its catalogue must be storable.
    body = {"messages": {"a": "A"}}
    assert api.put("/api/v1/translations/en/Billing_EU/", body, format="json").status_code == 201
    assert api.get("/api/v1/translations/en/Billing_EU/").json()["messages"] == {"a": "A"}


def test_read_key_reads_but_cannot_write():
    reader = client("read")
    assert reader.put(URL, {"messages": {}}, format="json").status_code == 403
    assert reader.get(URL).status_code == 404


def test_key_limited_to_workflows_reaches_only_their_namespaces():
    limited = client("admin", workflows=("welcome",))
    assert limited.put(URL, {"messages": {"a": "A"}}, format="json").status_code == 201
    other = limited.put("/api/v1/translations/en/billing/", {"messages": {}}, format="json")
    assert other.status_code == 403
    assert limited.get("/api/v1/translations/en/common/").status_code == 404


def test_workflow_default_locale_is_set_and_read_through_the_api(api):
    from tests.factories import email_definition

    body = {"key": "w", "name": "W", "definition": email_definition("hi"), "default_locale": "fr"}
    created = api.post("/api/v1/workflows/", body, format="json")
    assert created.status_code == 201 and created.json()["default_locale"] == "fr"
    body["default_locale"] = "klingon"
    refused = api.put("/api/v1/workflows/w/", body, format="json")
    assert refused.json()["field"] == "default_locale"
