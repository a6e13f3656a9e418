"""What the API answers when it cannot reach a view's logic: the database is unreachable
(503 + Retry-After, issue 24 item 8) or the Host is not allowed (JSON, not HTML)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.chaos import free_port
from tests.factories import PAYLOAD


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_answers_503_with_retry_after(api, workflow):
    body = {"workflow": workflow.key, "idempotency_key": "k", "payload": PAYLOAD}
    port = connection.settings_dict["PORT"]
    connection.close()
    # Only this process's connection points at a port nobody listens on; the shared
    # server is not touched.
    connection.settings_dict["PORT"] = free_port()
    try:
        response = api.post("/api/v1/triggers/", body, format="json")
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    assert response.status_code == 503, response.content
    assert response["Retry-After"].isdigit()
    error = response.json()
    assert error["code"] == "database_unavailable"
    assert error["field"] is None and error["errors"][0]["code"] == "database_unavailable"
    assert "connection" not in error["message"].lower()  # never the driver's text
    assert api.post("/api/v1/triggers/", body, format="json").status_code == 201


def test_a_disallowed_host_under_api_answers_the_json_error_shape(client, settings):
    settings.ALLOWED_HOSTS = ["notifyflow.example"]
    response = client.get("/api/v1/triggers/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = response.json()
    assert (error["code"], error["field"]) == ("disallowed_host", "Host")
    assert error["errors"] == [
        {"field": "Host", "code": "disallowed_host", "message": error["message"]}
    ]


def test_a_disallowed_host_outside_api_keeps_djangos_page(client, settings):
    settings.ALLOWED_HOSTS = ["notifyflow.example"]
    response = client.get("/admin/login/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
