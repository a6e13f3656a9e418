"""Schemathesis against the schema the API serves: every documented operation, with
generated valid and invalid inputs, answers a documented status with a body matching the
schema, and never a 5xx. ``-m schemathesis`` selects it; CI runs it on both databases."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from notifyflow.wsgi import application
from tests.factories import WorkflowFactory

# Examples per operation: enough to reach every branch of the input validation, and
# the whole module stays well under a minute on CI.
MAX_EXAMPLES = int(os.environ.get("NOTIFYFLOW_SCHEMATHESIS_EXAMPLES", "25"))


@pytest.fixture
def keep_the_test_connection():
    """The WSGI app closes the database connection after each request (Django's
    close_old_connections); inside a test's transaction that would close it under the
    test. Django's own test client disconnects it the same way."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


# The schema as served (no database needed to render it); one test per operation.
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.mark.schemathesis
@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_as_its_schema_says(case, api_key, keep_the_test_connection):
    WorkflowFactory(key="conformance")
    case.call_and_validate(
        headers={"Authorization": f"Bearer {api_key}"},
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance],
    )
