"""A worker's reused database connection that the server closed is dropped and
replaced, and a step whose outcome met the dead connection records it once."""

from __future__ import annotations

from datetime import UTC

import pytest
from django.db import OperationalError, connection

from executions import engine, worker_health
from executions.models import Delivery, DeliveryStatus, StepExecutionLog
from executions.outcomes import StepOutcome
from executions.providers import sms
from executions.recording import postgres as recording_postgres
from executions.selectors import instance_status_history
from tests.factories import TriggerInstanceFactory, WorkflowFactory
from tests.fakes import terminate_backend
from triggers.models import TriggerStatus, TriggerStatusChange

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _select_one() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


def test_a_connection_the_server_closed_is_replaced_after_the_failing_task():
    _select_one()
    terminate_backend(connection)
    with pytest.raises(OperationalError):
        _select_one()  # the task that meets it fails (and is retried)
    worker_health.close_dead_connections()
    assert _select_one() == 1  # the next task has a fresh connection


def test_a_healthy_connection_is_kept_and_not_pinged():
    _select_one()
    before = connection.connection
    worker_health.close_dead_connections()
    assert connection.connection is before
    # No CONN_HEALTH_CHECKS ping re-armed for the next task's first query.
    assert connection.health_check_done


def test_receivers_run_around_every_task():
    from celery.signals import task_postrun, task_prerun

    worker_health.install()
    worker_health.install()  # idempotent (dispatch_uid)
    for signal in (task_prerun, task_postrun):
        receivers = [
            r for r in signal.receivers if r[0][0] == f"notifyflow.worker_health.{signal.name[5:]}"
        ]
        assert len(receivers) == 1, signal


def test_step_whose_connection_dies_mid_send_records_its_outcome_once(settings, monkeypatch):
    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", lambda *a, **k: None)
    settings.SMS_BACKEND = "tests.fakes.BackendKillingSmsBackend"
    wf = WorkflowFactory(
        definition={
            "entry_node_id": "text",
            "edges": [],
            "nodes": [
                {"id": "text", "type": "sms", "config": {"to": "+15005550006", "body": "hi"}}
            ],
        }
    )
    instance = TriggerInstanceFactory(workflow=wf)

    assert engine.step_execute(instance_id=instance.pk) == StepOutcome.COMPLETED

    assert len(sms.outbox) == 1
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    logs = StepExecutionLog.objects.filter(trigger=instance)
    assert [(log.node_id, log.success) for log in logs] == [("text", True)]
    delivery = Delivery.objects.get(instance=instance)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 1)


def test_outcome_replayed_after_its_commit_landed_writes_nothing_twice(settings, monkeypatch):
    """The connection dies after the outcome's COMMIT reached the server (the reply is
    what got lost): the replay is fenced out and writes no second log or audit row."""
    monkeypatch.setattr("triggers.dispatch.send_task_on_commit", lambda *a, **k: None)
    real = recording_postgres.record_reconnecting
    replays: list[bool] = []

    def commit_then_lose_the_connection(record, instance_id, **kwargs):
        def record_once_then_die(replay: bool) -> bool:
            replays.append(replay)
            recorded = record(replay)
            if not replay:
                terminate_backend(connection)
                _select_one()  # raises: the worker cannot know the COMMIT landed
            return recorded

        return real(record_once_then_die, instance_id, **kwargs)

    monkeypatch.setattr(recording_postgres, "record_reconnecting", commit_then_lose_the_connection)
    instance = TriggerInstanceFactory(workflow=WorkflowFactory())

    engine.step_execute(instance_id=instance.pk)

    assert replays == [False, True]
    assert StepExecutionLog.objects.filter(trigger=instance).count() == 1
    # One release in the history (the step log records it; no audit row twice either).
    history = instance_status_history(instance=instance)
    assert [c.from_status for c in history].count("processing") == 1
    assert not TriggerStatusChange.objects.filter(instance=instance).exists()
    assert Delivery.objects.get(instance=instance).attempts == 1


@pytest.mark.both_databases
@pytest.mark.django_db
def test_prep_save_gives_what_djangos_get_db_prep_save_gives_for_the_step_tables():
    """The hot statement builders' shortcut stores exactly what Django would: every
    field of the instance, step log, delivery and attempt rows, with a value of each
    kind the engine passes (a UUID also as its text)."""
    import uuid as uuid_module
    from datetime import UTC, datetime

    from executions.models import DeliveryAttempt
    from notifyflow import db
    from triggers.models import TriggerInstance

    samples = {
        "UUIDField": [uuid_module.uuid4(), str(uuid_module.uuid4()), None],
        "CharField": ["processing", "", None],
        "TextField": ["an error", ""],
        "PositiveIntegerField": [0, 3],
        "BooleanField": [True, False],
        "DateTimeField": [datetime(2026, 1, 1, tzinfo=UTC), None],
        "JSONField": [{"a": [1, "b"]}, {}, [], "text", None],
    }
    for model in (TriggerInstance, StepExecutionLog, Delivery, DeliveryAttempt):
        for field in model._meta.concrete_fields:
            target = field.target_field if field.is_relation else field
            for value in samples.get(target.get_internal_type(), []):
                expected = field.get_db_prep_save(value, connection)
                got = db.prep_save(field)(value)
                if target.get_internal_type() == "JSONField" and expected is not None:
                    assert type(got) is type(expected) and got.obj == expected.obj, field
                    # The same encoder: dates, UUIDs and decimals written alike.
                    assert got.dumps(got.obj) == expected.dumps(expected.obj), field
                else:
                    assert got == expected, (model.__name__, field.name, value)


@pytest.mark.both_databases
@pytest.mark.django_db
def test_prep_save_of_a_naive_datetime_is_made_aware_as_django_makes_it():
    """Only an aware datetime is passed as it is: a naive one still gets Django's
    warning and its conversion to the current time zone."""
    from datetime import datetime

    from notifyflow import db

    field = StepExecutionLog._meta.get_field("started_at")
    naive = datetime(2026, 1, 1, 12, 0)
    with pytest.warns(RuntimeWarning):
        expected = field.get_db_prep_save(naive, connection)
    with pytest.warns(RuntimeWarning):
        got = db.prep_save(field)(naive)
    assert got == expected


def test_a_prepared_fetch_on_a_connection_the_server_closed_fails_then_reconnects():
    """The engine's statements on psycopg's own connection fail as any statement does
    when the server closed it (Django's OperationalError: the task retries), and run
    on the new connection once the dead one is dropped."""
    from notifyflow import db

    assert db.fetch_prepared("SELECT %s::int", [1]) == (1,)
    terminate_backend(connection)
    with pytest.raises(OperationalError):
        db.fetch_prepared("SELECT %s::int", [2])
    worker_health.close_dead_connections()
    assert db.fetch_prepared("SELECT %s::int", [3]) == (3,)
    assert db.fetch_prepared("SELECT generate_series(1, %s)", [2], many=True) == [(1,), (2,)]


def test_a_prepared_fetch_shows_in_the_query_log_and_to_execute_wrappers():
    """Tests capturing queries and execute wrappers still see the engine's statements."""
    from django.test.utils import CaptureQueriesContext

    from notifyflow import db

    with CaptureQueriesContext(connection) as captured:
        assert db.fetch_prepared("SELECT %s::int + 40", [2]) == (42,)
    assert [q["sql"] for q in captured.captured_queries] == ["SELECT 2::int + 40"]
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        assert db.fetch_prepared("SELECT %s::int", [7]) == (7,)
    assert seen == ["SELECT %s::int"]


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29 05:33:30.123456+00",
        "2026-11-29 05:33:30+00",
        "2026-11-29 05:33:30.12+00",
        "0001-01-01 00:00:00+00",
        "9999-12-31 23:59:59.999999+00",
        "2026-11-29 05:33:30+05:30",
        "2026-11-29 05:33:30.5-03:30:15",
    ],
)
def test_timestamps_load_as_djangos_loader_loads_them(text):
    """The session's ISO form is parsed directly; every value reads as Django's own
    time zone loader reads it (UTC, same instant, same type)."""
    from django.db.backends.postgresql.psycopg_any import BaseTzLoader
    from psycopg import postgres, pq

    connection.ensure_connection()
    oid = postgres.types["timestamptz"].oid

    class DjangoUtcLoader(BaseTzLoader):
        timezone = UTC

    registered = connection.connection.adapters.get_loader(oid, pq.Format.TEXT)
    ours = registered(oid, connection.connection)
    django_loader = DjangoUtcLoader(oid, connection.connection)
    for data in (text.encode(), memoryview(text.encode())):
        got, expected = ours.load(data), django_loader.load(data)
        assert got == expected and got.tzinfo is expected.tzinfo is UTC, text
