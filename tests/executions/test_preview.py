"""Preview: the path a payload would take, every node rendered, nothing sent
and nothing written."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core import mail

from executions.providers import sms
from tests.admin_helpers import make_superuser
from tests.factories import WorkflowFactory

pytestmark = pytest.mark.django_db

BRANCHING = {
    "entry_node_id": "welcome",
    "nodes": [
        {
            "id": "welcome",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Hi {{ payload.name }}",
                "body": "Plan {{ payload.plan }}",
                "html_body": "<p>{{ payload.name }}</p>",
            },
        },
        {"id": "pause", "type": "delay", "config": {"duration": "1h"}},
        {"id": "pro", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "Pro!"}},
        {
            "id": "listen",
            "type": "wait",
            "config": {"event": "delivery.opened", "timeout": "24h"},
        },
        {
            "id": "hook",
            "type": "webhook",
            "config": {
                "url": "https://hooks.example.com/u/{{ payload.name }}",
                "body": {"n": "{{ payload.name }}"},
            },
        },
        {
            "id": "tell",
            "type": "emit",
            "config": {"event": "done", "context": {"who": "{{ payload.name }}"}},
        },
        {"id": "gather", "type": "batch", "config": {"window": "1m", "key": "{{ payload.plan }}"}},
        {"id": "cap", "type": "throttle", "config": {"limit": 2, "window": "1d"}},
        {
            "id": "bell",
            "type": "in_app",
            "config": {"title": "Hi {{ payload.name }}", "body": "Plan {{ payload.plan }}"},
        },
        {
            "id": "buzz",
            "type": "push",
            "config": {
                "title": "Hi {{ payload.name }}",
                "body": "Plan {{ payload.plan }}",
                "data": {"plan": "{{ payload.plan }}"},
                "ttl": 3600,
                "badge": 1,
            },
        },
        {
            "id": "post",
            "type": "chat",
            "config": {
                "text": "{{ payload.name }} is on {{ payload.plan }}",
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": "*{{ payload.plan }}*"}}
                ],
                "webhook_url": "https://hooks.example.com/services/T1/B2/x",
            },
        },
    ],
    "edges": [
        {"from": "welcome", "to": "pause"},
        {"from": "pause", "to": "pro", "condition": 'payload.plan == "pro"'},
        {"from": "pause", "to": "listen"},
        {"from": "listen", "to": "hook", "condition": "vars.wait_listen.received"},
        {"from": "listen", "to": "tell"},
        {"from": "pro", "to": "gather"},
        {"from": "hook", "to": "cap"},
        {"from": "cap", "to": "bell"},
        {"from": "bell", "to": "buzz"},
        {"from": "buzz", "to": "post"},
    ],
}
PAYLOAD = {"name": "Ada <3", "email": "ada@example.com", "phone": "+15005550006", "plan": "free"}


@pytest.fixture
def workflow(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    return WorkflowFactory(key="onboarding", definition=BRANCHING)


def row_counts() -> dict[str, int]:
    return {m._meta.label: m._default_manager.count() for m in apps.get_models()}


def test_preview_follows_the_payloads_path_and_writes_nothing(api, workflow):
    mail.outbox = []
    before = row_counts()
    response = api.post(
        "/api/v1/workflows/onboarding/preview/", {"payload": PAYLOAD}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["path"] == ["welcome", "pause", "listen", "tell"]
    nodes = {n["node_id"]: n for n in body["nodes"]}
    assert nodes["welcome"]["rendered"]["subject"] == "Hi Ada <3"
    assert nodes["welcome"]["rendered"]["html_body"] == "<p>Ada &lt;3</p>"
    assert nodes["listen"]["output"] == {"received": False, "event": None}
    assert nodes["tell"]["rendered"]["context"] == {"who": "Ada <3"}
    assert all(n["error"] is None for n in body["nodes"])
    assert row_counts() == before
    assert mail.outbox == [] and sms.outbox == []

    pro = api.post(
        "/api/v1/workflows/onboarding/preview/",
        {"payload": {**PAYLOAD, "plan": "pro"}, "version": 1},
        format="json",
    ).json()
    assert pro["path"] == ["welcome", "pause", "pro", "gather"]
    assert pro["nodes"][3]["output"]["count"] == 1  # a preview opens no batch
    assert pro["nodes"][2]["rendered"] == {"to": "+15005550006", "body": "Pro!"}
    assert row_counts() == before


def test_preview_reports_a_render_error_at_its_node(api, workflow):
    response = api.post(
        "/api/v1/workflows/onboarding/preview/", {"payload": {"name": "x"}}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["path"] == ["welcome"]
    assert "template error" in body["nodes"][0]["error"]  # the node names the field it failed on


def test_preview_unknown_workflow_or_version_is_404_and_bad_payload_400(api, workflow):
    assert api.post("/api/v1/workflows/nope/preview/", {}, format="json").status_code == 404
    missing = api.post(
        "/api/v1/workflows/onboarding/preview/", {"payload": {}, "version": 9}, format="json"
    )
    assert missing.status_code == 404 and missing.json()["field"] == "version"
    bad = api.post("/api/v1/workflows/onboarding/preview/", {"payload": [1]}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "payload"


def test_admin_preview_page_renders_the_path(client, workflow):
    import json

    client.force_login(make_superuser())
    change = client.get(f"/admin/workflows/workflow/{workflow.pk}/change/")
    assert 'id="nf-preview"' in change.content.decode()
    before = row_counts()
    page = client.post(
        f"/admin/workflows/workflow/{workflow.pk}/preview/",
        {"payload": json.dumps({**PAYLOAD, "plan": "pro"}), "version": ""},
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "welcome → pause → pro" in html and "Hi Ada &lt;3" in html
    assert row_counts() == before


def test_preview_renders_every_address_field(api):
    WorkflowFactory(
        key="addresses",
        definition={
            "entry_node_id": "mail",
            "nodes": [
                {
                    "id": "mail",
                    "type": "email",
                    "config": {
                        "to": "{{ payload.email }}",
                        "reply_to": ["{{ payload.name | downcase }}@example.com"],
                        "from_email": "{{ payload.name }} <team@example.com>",
                        "subject": "Hi",
                        "body": "Hello",
                    },
                },
                {"id": "text", "type": "sms", "config": {"to": "{{ payload.phone }}", "body": "x"}},
            ],
            "edges": [{"from": "mail", "to": "text"}],
        },
    )
    body = api.post(
        "/api/v1/workflows/addresses/preview/",
        {"payload": {**PAYLOAD, "name": "Ada"}},
        format="json",
    ).json()
    mail_node, sms_node = body["nodes"]
    assert mail_node["error"] is None and sms_node["error"] is None
    assert mail_node["rendered"] == {
        "to": "ada@example.com",
        "reply_to": ["ada@example.com"],
        "from_email": "Ada <team@example.com>",
        "subject": "Hi",
        "body": "Hello",
    }
    assert sms_node["rendered"]["to"] == "+15005550006"


def test_preview_leaves_no_template_field_of_any_node_type_unrendered():
    """Every templated field of every node type, as the definition's specs list them."""
    import json

    from executions.preview import render_fields
    from workflows.definition import node_types

    context = {"payload": {"v": "x"}}
    for node_type, spec in ((t.name, t.fields) for t in node_types.all()):
        config = {}
        for key, field in spec.items():
            if not field.is_template:
                continue
            if field.kind == "template_object":
                config[key] = {"k": "{{ payload.v }}"}
            elif field.kind == "template_list":
                config[key] = ["{{ payload.v }}"]
            else:
                config[key] = "https://h.example.com/{{ payload.v }}"
        rendered = render_fields({"type": node_type, "config": config}, context)
        assert "{{" not in json.dumps(rendered), (node_type, rendered)


def test_preview_of_nodes_sending_to_the_recipient_renders_without_one(api):
    """A preview has no recipient: nodes without `to` render, `recipient` fields and
    `unsubscribe_url` are empty, nothing fails."""
    WorkflowFactory(
        key="to-people",
        definition={
            "entry_node_id": "mail",
            "nodes": [
                {
                    "id": "mail",
                    "type": "email",
                    "config": {
                        "subject": "Hi{{ recipient.email }}",
                        "body": "{{ unsubscribe_url }}",
                    },
                },
                {"id": "text", "type": "sms", "config": {"body": "x"}},
            ],
            "edges": [{"from": "mail", "to": "text"}],
        },
    )
    body = api.post("/api/v1/workflows/to-people/preview/", {"payload": {}}, format="json").json()
    assert body["path"] == ["mail", "text"]
    mail_node, sms_node = body["nodes"]
    assert mail_node["error"] is None and sms_node["error"] is None
    assert mail_node["rendered"] == {"subject": "Hi", "body": ""}
    assert mail.outbox == [] and sms.outbox == []
