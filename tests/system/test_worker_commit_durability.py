"""Workers commit asynchronously, except a step's outcome, which is always durable."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.test.utils import CaptureQueriesContext

from executions import engine
from executions.outcomes import StepOutcome
from tests.factories import TriggerInstanceFactory, WorkflowFactory

pytestmark = [
    pytest.mark.both_databases,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]


def _show() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_worker_sessions_default_to_async_commit():
    from notifyflow import db

    db.commit_asynchronously()  # what a worker's start-up hook calls
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
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    sql = [q["sql"] for q in captured.captured_queries]
    # No explicit transaction: every statement is its own (autocommit) transaction.
    assert not [s for s in sql if s.split()[0] in ("BEGIN", "COMMIT", "SET")]
    [outcome] = [s for s in sql if "executions_stepexecutionlog" in s]
    assert outcome.startswith("WITH moved AS (UPDATE")
    # The outcome's own transaction commits synchronously (set inside the statement)...
    assert outcome.endswith(", set_config('synchronous_commit', 'on', true)")
    # ...the claim before it asynchronously, as the session says.
    assert sql[0].startswith("WITH moved AS (UPDATE")
    assert "set_config" not in sql[0]
    # set_config(..., true) lasted only for that statement's transaction.
    assert _show() == "off"


def test_a_durable_transition_sets_synchronous_commit_for_its_own_transaction_only():
    from triggers import state

    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    with transaction.atomic():
        assert state.transition(
            instance_id=instance.pk,
            from_status="enqueued",
            to_status="failed",
            reason="test",
            actor="test",
            durable=True,
        )
        assert _show() == "on"  # in effect for the transaction's COMMIT
    assert _show() == "off"


def test_every_statement_of_a_step_fits_the_raised_parse_cache_bound(monkeypatch):
    """psycopg re-parses a query with more parameters than its cache bound on every
    execution; notifyflow.db raises the bound to cover every statement a step runs."""
    from notifyflow import db

    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", lambda *a, **k: None)
    counts: list[int] = []

    def count(execute, sql, params, many, context):
        counts.append(len(params or ()))
        return execute(sql, params, many, context)

    instance = TriggerInstanceFactory(workflow=WorkflowFactory())
    with connection.execute_wrapper(count):
        assert engine.step_execute(instance_id=instance.pk) == StepOutcome.ADVANCED
    assert counts and max(counts) <= db.PARSE_CACHE_MAX_PARAMS
