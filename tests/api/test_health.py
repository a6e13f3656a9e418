from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.broker
def test_healthz_answers_without_auth():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


@pytest.mark.parametrize(
    "dead_broker", ["redis://127.0.0.1:1/0", "amqp://guest:guest@127.0.0.1:1//"]
)
def test_healthz_is_503_when_the_broker_is_down(monkeypatch, dead_broker):
    from kombu import Connection

    from notifyflow.celery import app

    # A real connection attempt to a port where nothing listens, on either broker.
    monkeypatch.setattr(
        app, "connection_for_write", lambda: Connection(dead_broker, connect_timeout=1)
    )
    response = Client().get("/healthz")
    assert response.status_code == 503
    # ok/fail only: no driver text (host, port, exception) for an unauthenticated caller.
    assert response.json() == {"status": "unavailable", "database": "ok", "broker": "fail"}
    assert "127.0.0.1" not in response.content.decode()


def test_openapi_schema_and_docs():
    schema = Client().get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in ("/api/v1/triggers/", "/api/v1/workflows/", "/api/v1/step-logs/"):
        assert path in text
    assert Client().get("/api/docs/").status_code == 200


def _schema() -> dict:
    return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


def test_docs_pages_load_their_assets_from_our_static_files_not_a_cdn():
    for url in ("/api/docs/", "/api/redoc/"):
        html = Client().get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html, url
        assert "cdn" not in html.lower() and "@latest" not in html, url
        assert "https://" not in html and "http://" not in html.replace("http://www.w3.org", ""), (
            url
        )


def test_schema_declares_bearer_auth_on_every_api_operation():
    schema = _schema()
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key from `manage.py create_api_key NAME` or the admin.",
    }
    assert schema["components"]["securitySchemes"]["recipientToken"]["scheme"] == "bearer"
    for path, operations in schema["paths"].items():
        # The in-app feed takes a recipient token, and only that.
        scheme = "recipientToken" if path.startswith("/api/v1/feed/") else "bearerAuth"
        for method, operation in operations.items():
            assert operation["security"] == [{scheme: []}], (method, path)
            assert "401" in operation["responses"], (method, path)


def test_list_endpoints_are_documented_as_pages():
    paths = _schema()["paths"]
    for path in (
        "/api/v1/triggers/",
        "/api/v1/triggers/{id}/steps/",
        "/api/v1/step-logs/",
        "/api/v1/workflows/",
        "/api/v1/workflow-triggers/",
    ):
        ok = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].startswith("#/components/schemas/Paginated"), path


def test_error_shape_is_documented_where_it_applies():
    paths = _schema()["paths"]
    error = {"$ref": "#/components/schemas/Error"}

    def documented(path: str, method: str) -> set[str]:
        responses = paths[path][method]["responses"]
        return {
            code
            for code, response in responses.items()
            if response.get("content", {}).get("application/json", {}).get("schema") == error
        }

    # every keyed call: no key, out of scope, throttled, database unavailable
    keyed = {"401", "403", "429", "503"}
    assert documented("/api/v1/triggers/", "post") == {"400", "409", "411", "413", "415"} | keyed
    # 400 everywhere: an unknown query parameter is refused on every operation.
    assert documented("/api/v1/triggers/{id}/", "get") == {"400", "404"} | keyed
    assert documented("/api/v1/triggers/{id}/cancel/", "post") >= {"404", "409"}
    assert documented("/api/v1/triggers/", "get") == {"400"} | keyed
    # Answered by the HTTP server (gunicorn) before the app: documented, no error shape.
    assert "content" not in paths["/api/v1/triggers/"]["get"]["responses"]["414"]


_QUEUE_TABLE_OPTIONS = (
    "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay,"
    " autovacuum_analyze_scale_factor, autovacuum_vacuum_insert_scale_factor,"
    " autovacuum_vacuum_insert_threshold"
)


@pytest.mark.postgres
def test_readyz_warns_of_missing_queue_table_autovacuum_settings_and_stays_ready():
    from django.db import connection

    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute(f"ALTER TABLE triggers_triggerinstance RESET ({_QUEUE_TABLE_OPTIONS})")
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert body["autovacuum"].startswith("warning: ")
    assert "lacks its autovacuum settings" in body["autovacuum"]
    assert "autovacuum_vacuum_threshold" in body["autovacuum"]


@pytest.mark.postgres
def test_readyz_warns_when_autovacuum_is_off_for_the_queue_table():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE triggers_triggerinstance SET (autovacuum_enabled = off)")
    response = Client().get("/readyz")
    assert response.status_code == 200
    # The server's own autovacuum may be off too (this machine's is): either finding.
    assert response.json()["autovacuum"].startswith("warning: ")
    assert "is off" in response.json()["autovacuum"]


@pytest.mark.postgres
def test_readyz_reads_the_autovacuum_settings_at_most_once_a_minute():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as first:
        answer = Client().get("/readyz").json()["autovacuum"]
    with CaptureQueriesContext(connection) as second:
        assert Client().get("/readyz").json()["autovacuum"] == answer
    reads = [
        q["sql"] for q in first.captured_queries if "current_setting('autovacuum')" in q["sql"]
    ]
    assert len(reads) == 1
    assert not [q for q in second.captured_queries if "autovacuum" in q["sql"]]


def test_readyz_has_no_autovacuum_entry_on_other_databases():
    from notifyflow import db

    body = Client().get("/readyz").json()
    assert ("autovacuum" in body) is db.is_postgres()
