"""What the API does with input it does not expect (issue 23; issue 24 items 4 and 9):
nothing is silently ignored or redirected.

- A path without its trailing slash is served as the path with it, whatever the method
  (a 301 would turn ``POST /api/v1/triggers`` into a GET of the list).
- An unknown body field or query parameter is a 400 naming it; so are a blank or
  repeated filter and a page parameter that is not a number.
- A cursor this API did not return is a 400 ``invalid_cursor``, never a 500.
- A lone UTF-16 surrogate anywhere in a body is a 400 naming the field on every
  endpoint (one bulk item: only that item is invalid).
"""

from __future__ import annotations

import json
from base64 import b64encode

import pytest
import requests
from django.urls import URLPattern, URLResolver, get_resolver

from api.base import ApiView
from api_keys.services import api_key_create
from tests.factories import TriggerInstanceFactory, WorkflowFactory, email_sms_definition
from triggers.models import TriggerInstance
from triggers.models.events import WorkflowTrigger

pytestmark = pytest.mark.django_db


def _json(api, method: str, url: str, body: object):
    return api.generic(method, url, json.dumps(body), content_type="application/json")


# --- trailing slash -----------------------------------------------------------------


def test_a_post_without_the_trailing_slash_creates_the_trigger(api, workflow):
    body = {"workflow": workflow.key, "idempotency_key": "no-slash", "payload": {}}
    response = _json(api, "POST", "/api/v1/triggers", body)
    assert response.status_code == 201, response.content
    assert TriggerInstance.objects.filter(idempotency_key="no-slash").count() == 1


@pytest.mark.parametrize(
    "method,url,status",
    [
        ("GET", "/api/v1/triggers/{id}", 200),
        ("POST", "/api/v1/triggers/{id}/cancel", 200),
        ("PUT", "/api/v1/workflows/{key}", 200),
        ("GET", "/api/v1/workflows", 200),
    ],
)
def test_every_method_is_served_without_the_trailing_slash(api, workflow, method, url, status):
    instance = TriggerInstanceFactory(workflow=workflow)
    body = (
        {"key": workflow.key, "name": "Renamed", "definition": email_sms_definition()}
        if method == "PUT"
        else {}
    )
    response = _json(api, method, url.format(id=instance.pk, key=workflow.key), body)
    assert response.status_code == status, response.content


def test_an_unknown_path_without_a_slash_is_still_a_404(api):
    assert api.get("/api/v1/no-such-thing").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_requests_posting_without_the_trailing_slash_creates_the_trigger(live_server, settings):
    """What a Python client sees: requests follows a 301 as a GET and would have got the
    trigger list with 200."""
    settings.NOTIFYFLOW_THROTTLE_RATE = ""
    workflow = WorkflowFactory(key="slashless")
    raw = api_key_create(name="slashless", scope="admin")[1]
    response = requests.post(
        f"{live_server.url}/api/v1/triggers",
        json={"workflow": workflow.key, "idempotency_key": "requests-1", "payload": {}},
        headers={"Authorization": f"Bearer {raw}"},
        timeout=30,
    )
    assert response.history == [] and response.status_code == 201, response.text
    assert response.json()["idempotency_key"] == "requests-1"
    assert TriggerInstance.objects.filter(idempotency_key="requests-1").count() == 1


# --- unknown fields and parameters ----------------------------------------------------


def test_a_misspelt_event_field_is_refused_naming_it(api, workflow):
    response = _json(api, "POST", "/api/v1/events/", {"name": "E", "subject": ["order:1"]})
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["code"], body["field"]) == ("unknown_field", "subject")
    assert "subjects" in body["message"]  # the expected names are listed


@pytest.mark.parametrize(
    "method,url,body",
    [
        ("POST", "/api/v1/triggers/", {"workflow": "{key}", "idempotency_key": "k", "extra": 1}),
        (
            "POST",
            "/api/v1/triggers/cancel/",
            {"workflow": "{key}", "idempotency_key": "k", "extra": 1},
        ),
        ("POST", "/api/v1/triggers/{id}/cancel/", {"reason": "r", "extra": 1}),
        ("POST", "/api/v1/triggers/{id}/events/", {"name": "E", "extra": 1}),
        ("POST", "/api/v1/triggers/{id}/retry/", {"extra": 1}),
        ("POST", "/api/v1/triggers/{id}/run-now/", {"extra": 1}),
        ("POST", "/api/v1/triggers/bulk/", {"items": [], "extra": 1}),
        ("POST", "/api/v1/workflows/", {"key": "n", "name": "N", "definition": {}, "extra": 1}),
        ("POST", "/api/v1/workflows/{key}/pause/", {"extra": 1}),
        ("POST", "/api/v1/workflows/{key}/preview/", {"payload": {}, "extra": 1}),
        (
            "POST",
            "/api/v1/workflow-triggers/",
            {"event_name": "E", "workflow": "{key}", "extra": 1},
        ),
        ("POST", "/api/v1/workflow-triggers/{binding}/preview-key/", {"context": {}, "extra": 1}),
    ],
)
def test_an_unknown_body_field_is_refused_on_every_endpoint(api, workflow, method, url, body):
    instance = TriggerInstanceFactory(workflow=workflow)
    binding = WorkflowTrigger.objects.create(event_name="E", workflow=workflow)
    url = url.format(id=instance.pk, key=workflow.key, binding=binding.pk)
    body = {k: (v.format(key=workflow.key) if isinstance(v, str) else v) for k, v in body.items()}
    response = _json(api, method, url, body)
    assert response.status_code == 400, (url, response.content)
    assert (response.json()["code"], response.json()["field"]) == ("unknown_field", "extra")
    assert TriggerInstance.objects.count() == 1


def test_an_unknown_field_in_one_bulk_item_refuses_only_that_item(api, workflow):
    items = [
        {"workflow": workflow.key, "idempotency_key": "a", "payload": {}},
        {"workflow": workflow.key, "idempotency_key": "b", "payload": {}, "paylod": {}},
    ]
    response = _json(api, "POST", "/api/v1/triggers/bulk/", {"items": items})
    assert response.status_code == 200, response.content
    first, second = response.json()["results"]
    assert first["status"] == "created"
    assert second["status"] == "invalid"
    assert (second["error"]["code"], second["error"]["field"]) == ("unknown_field", "paylod")


def test_an_unknown_filter_is_refused_not_ignored(api, workflow):
    TriggerInstanceFactory(workflow=workflow)
    response = api.get("/api/v1/triggers/?state=failed")
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == ("unknown_parameter", "state")


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/triggers/{id}/?x=1",
        "/api/v1/triggers/{id}/timeline/?x=1",
        "/api/v1/triggers/{id}/steps/?x=1",
        "/api/v1/step-logs/?x=1",
        "/api/v1/workflows/?x=1",
        "/api/v1/workflows/{key}/?cursor=abc",  # not a list: no page parameters
        "/api/v1/workflows/{key}/stats/?x=1",
        "/api/v1/workflows/{key}/diagram/?x=1",
        "/api/v1/workflow-triggers/?x=1",
    ],
)
def test_an_unknown_query_parameter_is_refused_on_every_read(api, workflow, url):
    instance = TriggerInstanceFactory(workflow=workflow)
    response = api.get(url.format(id=instance.pk, key=workflow.key))
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "unknown_parameter"


def test_a_query_parameter_on_a_post_is_refused(api, workflow):
    body = {"workflow": workflow.key, "idempotency_key": "q", "payload": {}}
    response = _json(api, "POST", "/api/v1/triggers/?workflow=x", body)
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == ("unknown_parameter", "workflow")
    assert not TriggerInstance.objects.exists()


def test_filters_and_page_parameters_are_still_allowed(api, workflow):
    TriggerInstanceFactory.create_batch(3, workflow=workflow)
    page = api.get(
        f"/api/v1/triggers/?workflow={workflow.key}&status=enqueued&page_size=2&include_payload=true"
    )
    assert page.status_code == 200, page.content
    assert len(page.json()["results"]) == 2
    following = api.get(page.json()["next"])
    assert following.status_code == 200 and len(following.json()["results"]) == 1
    assert api.get("/api/v1/workflows/?limit=1&offset=0").status_code == 200


@pytest.mark.parametrize(
    "url,field,code",
    [
        ("/api/v1/triggers/?workflow=", "workflow", "blank"),
        ("/api/v1/triggers/?status=", "status", "blank"),
        ("/api/v1/step-logs/?trigger=", "trigger", "blank"),
        ("/api/v1/workflow-triggers/?workflow=", "workflow", "blank"),
        ("/api/v1/workflows/{key}/diagram/?format=", "format", "blank"),
        ("/api/v1/triggers/?status=failed&status=completed", "status", "repeated_parameter"),
        ("/api/v1/triggers/?page_size=abc", "page_size", "invalid"),
        ("/api/v1/triggers/?page_size=0", "page_size", "invalid"),
        ("/api/v1/triggers/{id}/steps/?page_size=null", "page_size", "invalid"),
        ("/api/v1/workflows/?offset=null", "offset", "invalid"),
        ("/api/v1/workflows/?limit=-1", "limit", "invalid"),
        ("/api/v1/workflows/?limit=1e20", "limit", "invalid"),
    ],
)
def test_a_blank_repeated_or_malformed_parameter_is_refused(api, workflow, url, field, code):
    instance = TriggerInstanceFactory(workflow=workflow)
    response = api.get(url.format(id=instance.pk, key=workflow.key))
    assert response.status_code == 400, response.content
    assert (response.json()["field"], response.json()["code"]) == (field, code)


@pytest.mark.parametrize(
    "url", ["/api/v1/triggers/", "/api/v1/step-logs/", "/api/v1/workflow-triggers/"]
)
@pytest.mark.parametrize(
    "tokens",
    [b"p=abc", b"p=2026-01-01T00:00:00", b"o=x", b"r=2", b"p=99999-01-01"],
    ids=["text", "datetime", "offset", "reverse", "year"],
)
def test_a_forged_cursor_is_a_400_not_a_500(api, workflow, url, tokens):
    WorkflowTrigger.objects.create(event_name="E", workflow=workflow)
    cursor = b64encode(tokens).decode()
    response = api.get(f"{url}?cursor={cursor}")
    if response.status_code == 200:  # a position of the ordering column's own type
        return
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == ("invalid_cursor", "cursor")


# --- strict JSON types ------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,url,body,field",
    [
        ("POST", "/api/v1/triggers/{id}/cancel/", {"reason": 0}, "reason"),
        ("POST", "/api/v1/workflows/", {"key": "n", "name": 5, "definition": {}}, "name"),
        (
            "POST",
            "/api/v1/workflows/",
            {"key": "n", "name": "N", "is_active": "yes", "definition": {}},
            "is_active",
        ),
        ("POST", "/api/v1/workflows/{key}/preview/", {"payload": {}, "version": "1"}, "version"),
        (
            "POST",
            "/api/v1/workflow-triggers/",
            {"event_name": "E", "workflow": "{key}", "idempotency_setting": "{}"},
            "idempotency_setting",
        ),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_not_coerced(
    api, workflow, method, url, body, field
):
    instance = TriggerInstanceFactory(workflow=workflow)
    url = url.format(id=instance.pk, key=workflow.key)
    body = {k: (v.format(key=workflow.key) if k == "workflow" else v) for k, v in body.items()}
    response = _json(api, method, url, body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field


# --- lone surrogates ----------------------------------------------------------------------

SURROGATE_BODIES = {
    "triggers": (
        "POST",
        "/api/v1/triggers/",
        '{"workflow": "%(key)s", "idempotency_key": "s", "payload": {"name": "a\\ud800"}}',
        "payload.name",
    ),
    "trigger key": (
        "POST",
        "/api/v1/triggers/",
        '{"workflow": "%(key)s", "idempotency_key": "\\udfff"}',
        "idempotency_key",
    ),
    "events": (
        "POST",
        "/api/v1/events/",
        '{"name": "E", "context": {"list": ["ok", "\\ud800"]}}',
        "context.list[1]",
    ),
    "instance events": ("POST", "/api/v1/triggers/%(id)s/events/", '{"name": "\\ud800"}', "name"),
    "workflow definition": (
        "POST",
        "/api/v1/workflows/",
        '{"key": "sur", "name": "S", '
        '"definition": {"entry_node_id": "\\ud800", "nodes": [], "edges": []}}',
        "definition.entry_node_id",
    ),
    "workflow put": (
        "PUT",
        "/api/v1/workflows/%(key)s/",
        '{"key": "%(key)s", "name": "\\udbff"}',
        "name",
    ),
    "preview": (
        "POST",
        "/api/v1/workflows/%(key)s/preview/",
        '{"payload": {"name": "\\ud800"}}',
        "payload.name",
    ),
    "workflow triggers": (
        "POST",
        "/api/v1/workflow-triggers/",
        '{"event_name": "\\ud800", "workflow": "%(key)s"}',
        "event_name",
    ),
    "workflow trigger put": (
        "PUT",
        "/api/v1/workflow-triggers/%(binding)s/",
        '{"event_name": "E", "workflow": "%(key)s", '
        '"idempotency_setting": {"customExpression": "\\ud800"}}',
        "idempotency_setting.customExpression",
    ),
    "preview key": (
        "POST",
        "/api/v1/workflow-triggers/%(binding)s/preview-key/",
        '{"context": {"a": "\\ud800"}}',
        "context.a",
    ),
    "a key": (
        "POST",
        "/api/v1/triggers/",
        '{"workflow": "%(key)s", "idempotency_key": "s", "payload": {"\\ud800": 1}}',
        "payload",
    ),
    "an unknown key": ("POST", "/api/v1/triggers/bulk/", '{"items": [], "\\ud800": 1}', "body"),
}


@pytest.mark.parametrize("name", list(SURROGATE_BODIES))
def test_a_lone_surrogate_is_a_400_naming_the_field(api, workflow, name):
    method, url, raw, field = SURROGATE_BODIES[name]
    instance = TriggerInstanceFactory(workflow=workflow)
    binding = WorkflowTrigger.objects.create(event_name="E", workflow=workflow)
    values = {"key": workflow.key, "id": instance.pk, "binding": binding.pk}
    response = api.generic(method, url % values, raw % values, content_type="application/json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["code"], body["field"]) == ("lone_surrogate", field)
    assert TriggerInstance.objects.count() == 1


def test_a_lone_surrogate_in_one_bulk_item_refuses_only_that_item(api, workflow):
    raw = (
        '{"items": ['
        f'{{"workflow": "{workflow.key}", "idempotency_key": "a", "payload": {{}}}},'
        f'{{"workflow": "{workflow.key}", "idempotency_key": "b", "payload": {{"x": "\\ud800"}}}},'
        f'{{"workflow": "{workflow.key}", "idempotency_key": "c", "payload": {{}}}}'
        "]}"
    )
    response = api.generic("POST", "/api/v1/triggers/bulk/", raw, content_type="application/json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "invalid", "created"]
    assert (results[1]["error"]["code"], results[1]["error"]["field"]) == (
        "lone_surrogate",
        "payload.x",
    )
    assert set(TriggerInstance.objects.values_list("idempotency_key", flat=True)) == {"a", "c"}


def test_a_valid_surrogate_pair_is_an_ordinary_character(api, workflow):
    raw = (
        f'{{"workflow": "{workflow.key}", "idempotency_key": "pair", '
        '"payload": {"emoji": "\\ud83d\\ude00"}}'
    )
    response = api.generic("POST", "/api/v1/triggers/", raw, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["payload"]["emoji"] == "\U0001f600"


# --- every endpoint, and the schema -------------------------------------------------------


def _api_views(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            route = prefix + str(pattern.pattern)
            view = getattr(pattern.callback, "cls", None)
            if route.startswith("api/v1/"):
                yield route, view


def test_every_api_endpoint_validates_its_input_the_same_way():
    views = list(_api_views(get_resolver().url_patterns))
    assert len(views) > 20
    for route, view in views:
        assert view is not None and issubclass(view, ApiView), route


def test_the_schema_says_bodies_refuse_unknown_fields_and_strings_are_not_blank(api):
    schema = api.get("/api/schema/?format=json", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    for name in ("TriggerCreateInput", "EventInput", "WorkflowTriggerInput", "CancelInput"):
        assert components[name]["additionalProperties"] is False, name
    workflow = components["TriggerCreateInput"]["properties"]["workflow"]
    assert workflow["minLength"] == 1 and "pattern" in workflow
    triggers = schema["paths"]["/api/v1/triggers/"]["get"]
    page_size = next(p for p in triggers["parameters"] if p["name"] == "page_size")
    assert page_size["schema"]["minimum"] == 1
    cursor = next(p for p in triggers["parameters"] if p["name"] == "cursor")
    assert "invalid_cursor" in cursor["description"]
    assert "414" in triggers["responses"] and "400" in triggers["responses"]


@pytest.mark.parametrize(
    "url,field",
    [
        ("/api/v1/triggers/?include_payload=yes", "include_payload"),
        ("/api/v1/workflows/{key}/diagram/?version=1.0", "version"),
        ("/api/v1/workflows/{key}/diagram/?version=%201", "version"),
    ],
)
def test_a_query_value_not_written_as_the_schema_says_is_refused(api, workflow, url, field):
    response = api.get(url.format(key=workflow.key))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field


def test_a_workflow_key_must_be_a_json_string(api):
    response = _json(api, "POST", "/api/v1/workflows/", {"key": 12, "name": "N", "definition": {}})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "key"
