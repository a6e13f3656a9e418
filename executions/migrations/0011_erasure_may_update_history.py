"""Erasure (executions/erasure.py) may UPDATE history rows (PostgreSQL): the guard
function of triggers 0011 lets an UPDATE through when its transaction ran
``SET LOCAL notifyflow.erasure = on`` - the one place that replaces a person's
addresses by "[erased]". DELETE stays the purge's alone. SQLite keeps the Python-level
guards only (model save() refuses; erasure writes with UPDATE statements)."""

from django.db import migrations

from notifyflow import db

FUNCTION = """
CREATE OR REPLACE FUNCTION notifyflow_history_immutable() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('notifyflow.purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND current_setting('notifyflow.erasure', true) = 'on' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'notifyflow: %% rows are immutable (%% refused; purge_finished deletes)',
        TG_TABLE_NAME, TG_OP USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""

PREVIOUS = """
CREATE OR REPLACE FUNCTION notifyflow_history_immutable() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('notifyflow.purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'notifyflow: %% rows are immutable (%% refused; purge_finished deletes)',
        TG_TABLE_NAME, TG_OP USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""


def install(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(FUNCTION, params=[])


def uninstall(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(PREVIOUS, params=[])


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0010_steplog_skip_reason"),
        ("triggers", "0011_immutable_history"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
