"""The queue table's autovacuum, checked by ``manage.py check --deploy``: the server's
autovacuum off and migration 0002's per-table settings missing are each a warning;
other databases, a table not migrated yet and an unreachable database say nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import checks
from django.db import connection

from notifyflow import db
from triggers.checks import (
    QUEUE_TABLE_OPTIONS,
    QUEUE_TABLE_UNTUNED,
    SERVER_OFF,
    AutovacuumState,
    autovacuum_findings,
    autovacuum_state,
)

ROOT = Path(__file__).resolve().parents[2]
TUNED = {name: "0" for name in QUEUE_TABLE_OPTIONS}


def deploy_warning_ids() -> set[str]:
    return {
        m.id
        for m in checks.run_checks(include_deployment_checks=True)
        if m.id in (SERVER_OFF, QUEUE_TABLE_UNTUNED)
    }


def reset_queue_table_options() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE triggers_triggerinstance RESET ({', '.join(QUEUE_TABLE_OPTIONS)})"
        )


def test_a_tuned_table_on_a_server_with_autovacuum_has_no_finding():
    assert autovacuum_findings(AutovacuumState(server_on=True, table_options=TUNED)) == []


def test_server_autovacuum_off_is_a_warning():
    [finding] = autovacuum_findings(AutovacuumState(server_on=False, table_options=TUNED))
    assert finding.id == SERVER_OFF
    assert "`autovacuum` is off" in finding.message and "autovacuum = on" in finding.hint


def test_the_tables_own_autovacuum_disabled_is_the_same_warning():
    options = {**TUNED, "autovacuum_enabled": "off"}
    [finding] = autovacuum_findings(AutovacuumState(server_on=True, table_options=options))
    assert finding.id == SERVER_OFF and "triggers_triggerinstance" in finding.message
    assert "RESET (autovacuum_enabled)" in finding.hint


def test_missing_queue_table_settings_are_a_warning_naming_them():
    options = {k: v for k, v in TUNED.items() if k != "autovacuum_vacuum_threshold"}
    [finding] = autovacuum_findings(AutovacuumState(server_on=True, table_options=options))
    assert finding.id == QUEUE_TABLE_UNTUNED
    assert "autovacuum_vacuum_threshold" in finding.message
    assert "autovacuum_vacuum_scale_factor" not in finding.message


def test_retuned_values_are_not_a_finding():
    options = {**TUNED, "autovacuum_vacuum_threshold": "20000"}
    assert autovacuum_findings(AutovacuumState(server_on=True, table_options=options)) == []


def test_both_findings_at_once():
    findings = autovacuum_findings(AutovacuumState(server_on=False, table_options={}))
    assert [f.id for f in findings] == [SERVER_OFF, QUEUE_TABLE_UNTUNED]


def test_a_table_not_migrated_yet_and_other_databases_have_no_finding():
    assert autovacuum_findings(AutovacuumState(server_on=True, table_options=None)) == []
    assert autovacuum_findings(None) == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_reads_the_servers_setting_and_the_settings_migration_0002_set():
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        server_on = cursor.fetchone()[0] == "on"
    state = autovacuum_state()
    assert state is not None and state.server_on is server_on
    assert state.table_options is not None
    assert set(QUEUE_TABLE_OPTIONS) <= set(state.table_options)
    assert state.table_options["autovacuum_vacuum_threshold"] == "5000"


@pytest.mark.postgres
@pytest.mark.django_db
def test_check_deploy_warns_when_the_queue_tables_settings_are_reset():
    assert QUEUE_TABLE_UNTUNED not in deploy_warning_ids()
    reset_queue_table_options()  # rolled back with the test's transaction
    assert QUEUE_TABLE_UNTUNED in deploy_warning_ids()


@pytest.mark.postgres
@pytest.mark.django_db
def test_check_deploy_warns_when_autovacuum_is_off_for_the_queue_table():
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE triggers_triggerinstance SET (autovacuum_enabled = off)")
    assert SERVER_OFF in deploy_warning_ids()


@pytest.mark.skipif(db.is_postgres(), reason="the check's silence on other databases")
@pytest.mark.django_db
def test_check_deploy_says_nothing_on_sqlite():
    assert autovacuum_state() is None
    assert deploy_warning_ids() == set()


def test_check_deploy_skips_a_database_it_cannot_reach():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env={
            **env,
            "DJANGO_SETTINGS_MODULE": "notifyflow.settings",
            "DJANGO_DEBUG": "1",
            "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nowhere",
            "DB_CONNECT_TIMEOUT_S": "2",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert SERVER_OFF not in result.stderr and QUEUE_TABLE_UNTUNED not in result.stderr
