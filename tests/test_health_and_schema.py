from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_auth():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


def test_healthz_is_503_when_the_broker_is_down(settings):
    from notifyflow.celery import app

    old = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = Client().get("/healthz")
    finally:
        app.conf.broker_url = old
    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")


def test_openapi_schema_and_docs():
    schema = Client().get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/triggers/", "/api/v1/workflows/", "/api/v1/step-logs/"):
        assert path in text
    assert Client().get("/api/docs/").status_code == 200
