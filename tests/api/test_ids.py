"""Ids and keys are printable text, and every recipient id has a path (issue 39 item 4).

- Recipient ids, list keys, idempotency keys, workflow keys and event ids refuse control
  characters (NUL, newline, C0, C1), lone surrogates and bidi controls: 400 naming the
  field with a stable code (``nul_character``, ``control_character``, ``bidi_control``,
  ``lone_surrogate``), in a body and in a path - one rule, api.fields.
- A recipient id that collides with a route (``bulk``), holds ``/`` or is ``.``/``..``
  is refused wherever an id is created (``reserved_id``): any id that exists can be
  read, changed and erased by its path.
- A path under /api/ that is not UTF-8 once percent-decoded is a 400 ``invalid_path``
  (it was taken as the literal text ``%ED%A0%80``).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections

from api.base import ApiPathCheck
from recipients.models import Recipient
from tests.factories import (
    RecipientListFactory,
    TriggerInstanceFactory,
    WorkflowFactory,
    email_sms_definition,
)
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
# (text, code) of what no id or key may hold.
UNPRINTABLE = [
    ("a\nb", "control_character"),
    ("line\r\n", "control_character"),
    ("tab\there", "control_character"),
    ("esc\x1b[31m", "control_character"),
    ("del\x7f", "control_character"),
    ("nel\x85", "control_character"),
    ("sep\u2028", "control_character"),
    ("user\u202egnp.exe", "bidi_control"),
    ("isolate\u2066x\u2069", "bidi_control"),
    ("mark\u200f", "bidi_control"),
]
ROUTE_COLLIDING = ["bulk", ".", "..", "a/b", "/lead", "trail/"]


def _code(response, field: str) -> str:
    body = response.json()
    assert response.status_code == 400, response.content
    assert body["field"] == field, body
    assert field in body["message"], body
    return body["code"]


# --- recipient ids ---------------------------------------------------------------------


@pytest.mark.parametrize("text,code", UNPRINTABLE)
def test_a_recipient_id_in_a_path_must_be_printable(api, text, code):
    response = api.put(f"/api/v1/recipients/{quote(text)}/", {}, format="json")
    assert _code(response, "id") == code
    assert _code(api.get(f"/api/v1/recipients/{quote(text)}/"), "id") == code
    assert not Recipient.objects.exists()


def test_a_nul_in_a_path_id_is_named_as_a_nul_not_as_blank(api):
    response = api.get("/api/v1/recipients/a%00b/")
    assert _code(response, "id") == "nul_character"
    assert "NUL" in response.json()["message"]


@pytest.mark.parametrize("text,code", UNPRINTABLE)
def test_a_recipient_id_in_a_body_must_be_printable_wherever_one_is_created(api, text, code):
    RecipientListFactory(key="beta")
    workflow = WorkflowFactory()
    bulk = api.post("/api/v1/recipients/bulk/", {"items": [{"id": text}]}, format="json")
    (item,) = bulk.json()["results"]
    assert (item["status"], item["error"]["field"], item["error"]["code"]) == (
        "invalid",
        "id",
        code,
    )
    members = api.post("/api/v1/lists/beta/members/", {"recipients": [text]}, format="json")
    assert _code(members, "recipients.0") == code  # a ListField's naming
    for entry, field in ((text, "recipients[0]"), ({"id": text}, "recipients[0].id")):
        body = {"workflow": workflow.key, "idempotency_key": "k", "recipients": [entry]}
        assert _code(api.post("/api/v1/triggers/", body, format="json"), field) == code
    assert not Recipient.objects.exists()


@pytest.mark.parametrize("reserved", ROUTE_COLLIDING)
def test_a_route_colliding_recipient_id_is_refused_wherever_one_is_created(api, reserved):
    RecipientListFactory(key="beta")
    workflow = WorkflowFactory(key="welcome")
    bulk = api.post("/api/v1/recipients/bulk/", {"items": [{"id": reserved}]}, format="json")
    (item,) = bulk.json()["results"]
    assert (item["status"], item["error"]["code"], item["error"]["field"]) == (
        "invalid",
        "reserved_id",
        "id",
    )
    members = api.post("/api/v1/lists/beta/members/", {"recipients": [reserved]}, format="json")
    assert _code(members, "recipients.0") == "reserved_id"
    for entry, field in ((reserved, "recipients[0]"), ({"id": reserved}, "recipients[0].id")):
        body = {"workflow": "welcome", "idempotency_key": "k", "recipients": [entry]}
        assert _code(api.post("/api/v1/triggers/", body, format="json"), field) == "reserved_id"
    event = {"name": "signed_up", "context": {"recipients": [reserved]}}
    assert _code(api.post("/api/v1/events/", event, format="json"), "context.recipients[0]") == (
        "reserved_id"
    )
    assert not Recipient.objects.exists()
    assert not TriggerInstance.objects.filter(workflow=workflow).exists()


def test_the_bulk_route_stays_the_bulk_route(api):
    # No recipient can be called "bulk", so GET/PATCH/DELETE of recipients/bulk/ address
    # no one: the route is POST's (405 otherwise), never a person's unreachable record.
    api.post("/api/v1/recipients/bulk/", {"items": [{"id": "bulk"}]}, format="json")
    assert not Recipient.objects.filter(pk="bulk").exists()
    for method in ("get", "patch", "delete"):
        assert getattr(api, method)("/api/v1/recipients/bulk/").status_code == 405


@pytest.mark.parametrize(
    "recipient_id",
    ["user 1", "ÉLODIE", "用户-7", "😀", "50%off", "%ED%A0%80", "a.b", "...", "bulks"],
)
def test_every_id_that_can_be_created_can_be_read_changed_and_erased_by_its_path(api, recipient_id):
    created = api.post("/api/v1/recipients/bulk/", {"items": [{"id": recipient_id}]}, format="json")
    assert created.json()["results"][0]["status"] == "created", created.content
    path = f"/api/v1/recipients/{quote(recipient_id, safe='')}/"
    assert api.get(path).json()["id"] == recipient_id
    patched = api.patch(path, {"locale": "fr"}, format="json")
    assert (patched.status_code, patched.json()["locale"]) == (200, "fr")
    assert api.delete(path).status_code in (200, 204)
    assert not Recipient.objects.filter(pk=recipient_id).exists()


# --- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("text,code", UNPRINTABLE)
def test_idempotency_keys_and_workflow_keys_must_be_printable(api, text, code):
    workflow = WorkflowFactory(key="welcome")
    for field in ("idempotency_key", "workflow"):
        body = {"workflow": "welcome", "idempotency_key": "k", "payload": {}, field: text}
        assert _code(api.post("/api/v1/triggers/", body, format="json"), field) == code
        cancel = {"workflow": "welcome", "idempotency_key": "k", field: text}
        assert _code(api.post("/api/v1/triggers/cancel/", cancel, format="json"), field) == code
    # In bulk, on the lean path (plain items) as on the serializer's: that item only.
    items = [
        {"workflow": "welcome", "idempotency_key": text, "payload": {}},
        {"workflow": "welcome", "idempotency_key": text, "payload": {}, "recipients": ["r1"]},
        {"workflow": "welcome", "idempotency_key": "fine", "payload": {}},
    ]
    results = api.post("/api/v1/triggers/bulk/", {"items": items}, format="json").json()["results"]
    assert [r["status"] for r in results] == ["invalid", "invalid", "created"]
    assert {(r["error"]["field"], r["error"]["code"]) for r in results[:2]} == {
        ("idempotency_key", code)
    }
    assert [i.idempotency_key for i in TriggerInstance.objects.filter(workflow=workflow)] == [
        "fine"
    ]


@pytest.mark.parametrize("text,code", UNPRINTABLE[:2] + UNPRINTABLE[-3:])
def test_list_keys_workflow_keys_and_event_ids_must_be_printable(api, text, code):
    WorkflowFactory(key="welcome")
    instance = TriggerInstanceFactory()
    body = {"workflow": "welcome", "idempotency_key": "k", "recipients": [{"list": text}]}
    assert _code(api.post("/api/v1/triggers/", body, format="json"), "recipients[0]") == code
    workflow = {"key": f"new{text}", "name": "New", "definition": email_sms_definition()}
    assert _code(api.post("/api/v1/workflows/", workflow, format="json"), "key") == code
    event = {"name": "signed_up", "event_id": text, "context": {}}
    assert _code(api.post("/api/v1/events/", event, format="json"), "event_id") == code
    inbox = {"name": "paid", "event_id": text}
    answer = api.post(f"/api/v1/triggers/{instance.pk}/events/", inbox, format="json")
    assert _code(answer, "event_id") == code


def test_a_webhook_endpoint_s_workflow_keys_must_be_printable(api, settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    WorkflowFactory(key="welcome")
    body = {
        "url": "https://hooks.example.com/in",
        "event_types": ["instance.completed"],
        "workflows": ["welcome", "welcome\u202e"],
    }
    response = api.post("/api/v1/webhook-endpoints/", body, format="json")
    assert _code(response, "workflows.1") == "bidi_control"


def test_the_schema_says_ids_and_keys_are_printable(api):
    schema = api.get("/api/schema/?format=json", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    for component, field in (
        ("TriggerCreateInput", "idempotency_key"),
        ("TriggerCreateInput", "workflow"),
        ("EventInput", "event_id"),
        ("InlineRecipient", "id"),
    ):
        pattern = re.compile(components[component]["properties"][field]["pattern"])
        assert pattern.search("user-1"), (component, field)
        for text, _ in UNPRINTABLE:
            assert not pattern.search(text), (component, field, text)
    recipient = schema["paths"]["/api/v1/recipients/{id}/"]["get"]["parameters"]
    pattern = re.compile(next(p for p in recipient if p["name"] == "id")["schema"]["pattern"])
    assert [bool(pattern.search(t)) for t in ("user-1", "bulk", "a/b", "..", "a\nb")] == [
        True,
        False,
        False,
        False,
        False,
    ]


# --- paths that are not UTF-8 ----------------------------------------------------------


def _wsgi_get(app, raw_path: bytes, api_key: str) -> tuple[str, dict]:
    """GET through a WSGI application with PATH_INFO as a server gives it: the
    percent-decoded bytes, as latin-1."""
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": raw_path.decode("iso-8859-1"),
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "HTTP_AUTHORIZATION": f"Bearer {api_key}",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
    }
    answer: dict = {}
    # As Django's test client does: the test's connection outlives the request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        chunks = app(environ, lambda status, headers, exc=None: answer.update(status=status))
        body = b"".join(chunks)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    return answer["status"], json.loads(body)


@pytest.mark.parametrize(
    "raw",
    [b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"ok\xe9"],
    ids=["encoded-surrogate", "overlong-slash", "ff", "latin-1"],
)
def test_a_path_that_is_not_utf8_is_a_400_not_an_id(api_key, raw):
    Recipient.objects.create(pk=quote(raw))  # the text Django made of those bytes
    app = ApiPathCheck(WSGIHandler())
    status, body = _wsgi_get(app, b"/api/v1/recipients/" + raw + b"/", api_key)
    assert status.startswith("400"), body
    assert (body["code"], body["field"]) == ("invalid_path", "path")
    # The same text written as text (%25) is an id like any other.
    status, body = _wsgi_get(app, f"/api/v1/recipients/{quote(raw)}/".encode(), api_key)
    assert status.startswith("200") and body["id"] == quote(raw)


def test_the_application_gunicorn_serves_refuses_a_path_that_is_not_utf8():
    script = (
        "from notifyflow.wsgi import application; "
        "from tests.api.test_ids import _wsgi_get; "
        "print(_wsgi_get(application, b'/api/v1/recipients/%ED%A0%80/'.replace("
        "b'%ED%A0%80', bytes([0xED, 0xA0, 0x80])), 'key')[1]['code'])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.stdout.strip() == "invalid_path", done.stderr[-2000:]
