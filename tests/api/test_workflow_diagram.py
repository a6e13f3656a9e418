"""GET /api/v1/workflows/{key}/diagram/: the current version's diagram as Mermaid or DOT
text, older versions on request, documented as text (what the text holds:
tests/workflows/test_diagram.py)."""

from __future__ import annotations

import pytest

from tests.factories import WorkflowFactory, email_sms_definition

URL = "/api/v1/workflows/{}/diagram/"


@pytest.mark.django_db
@pytest.mark.parametrize("fmt, first_line", [("mermaid", "---"), ("dot", 'digraph "')])
def test_diagram_endpoint_answers_text_for_each_format(api, fmt, first_line):
    workflow = WorkflowFactory(definition=email_sms_definition(delay="1h"))
    response = api.get(URL.format(workflow.key), {"format": fmt})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = response.content.decode()
    assert text.startswith(first_line)
    for node_id, kind in (("hello", "email"), ("wait", "delay"), ("text", "sms")):
        assert node_id in text and kind in text


@pytest.mark.django_db
def test_diagram_defaults_to_mermaid_of_the_current_version_and_serves_older_ones(api):
    workflow = WorkflowFactory(definition=email_sms_definition())
    from workflows.services import workflow_save

    workflow_save(key=workflow.key, name=workflow.name, definition=email_sms_definition(delay="5m"))
    current = api.get(URL.format(workflow.key)).content.decode()
    assert "flowchart LR" in current and "wait" in current and "v2" in current
    first = api.get(URL.format(workflow.key), {"version": 1, "format": "dot"}).content.decode()
    assert '"wait"' not in first and "v1" in first
    missing = api.get(URL.format(workflow.key), {"version": 9})
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_version"


@pytest.mark.django_db
def test_unknown_format_is_400_naming_the_parameter(api):
    workflow = WorkflowFactory()
    response = api.get(URL.format(workflow.key), {"format": "svg"})
    assert response.status_code == 400
    assert response.json()["field"] == "format"
    assert response["Content-Type"] == "application/json"


@pytest.mark.django_db
def test_diagram_of_an_unknown_workflow_is_404_and_needs_a_key(api, client):
    assert api.get(URL.format("nope")).status_code == 404
    workflow = WorkflowFactory()
    assert client.get(URL.format(workflow.key)).status_code == 401


@pytest.mark.django_db
def test_the_diagram_is_documented_as_text(client):
    schema = client.get("/api/schema/").content.decode()
    path = schema.split("/api/v1/workflows/{key}/diagram/:", 1)[1].split("\n  /", 1)[0]
    assert "text/plain" in path and "format" in path and "version" in path
