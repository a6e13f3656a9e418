"""Workers commit asynchronously, except a step's outcome, which is always durable."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from django.test.utils import CaptureQueriesContext

from executions import engine

from .factories import TriggerInstanceFactory, WorkflowFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _show() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_worker_sessions_default_to_async_commit():
    from executions.worker_hooks import _worker_async_commit

    _worker_async_commit()
    try:
        connection.close()
        connection.ensure_connection()
        assert _show() == "off"
    finally:
        connection_created.disconnect(dispatch_uid="nf_set_async_commit")
        connection.close()
    connection.ensure_connection()
    assert _show() == "on"


def test_the_step_outcome_commits_synchronously(monkeypatch):
    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", lambda *a, **k: None)
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    with CaptureQueriesContext(connection) as captured:
        assert engine.step_execute(instance_id=instance.pk) == "advanced"
    sql = [q["sql"] for q in captured.captured_queries]
    at = sql.index("SET LOCAL synchronous_commit TO on")
    assert sql[at - 1] == "BEGIN" or sql[at - 1].startswith("BEGIN")
    assert sql[at + 1].startswith("WITH moved AS (UPDATE")
    assert "executions_stepexecutionlog" in sql[at + 1]
    assert sql[at + 2] == "COMMIT"
    # The claim before it ran in autocommit, asynchronously.
    assert sql[0].startswith("WITH moved AS (UPDATE")
