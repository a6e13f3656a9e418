from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_auth():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


def test_healthz_is_503_when_the_broker_is_down(monkeypatch):
    from kombu import Connection

    from notifyflow.celery import app

    # A real connection attempt to a port where nothing listens.
    monkeypatch.setattr(
        app, "connection_for_write", lambda: Connection("redis://127.0.0.1:1/0", connect_timeout=1)
    )
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")


def test_openapi_schema_and_docs():
    schema = Client().get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/triggers/", "/api/v1/workflows/", "/api/v1/step-logs/"):
        assert path in text
    assert Client().get("/api/docs/").status_code == 200
