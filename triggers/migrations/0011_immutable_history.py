"""History cannot be updated or deleted through the database either (PostgreSQL only):
a trigger on step logs, status changes and event records rejects UPDATE and DELETE.

The one way past it is the purge (triggers/retention.py): a transaction that ran
``SET LOCAL notifyflow.purge = on`` may DELETE (never UPDATE). SQLite, the embedded demo,
keeps the Python-level guards only.
"""

from django.db import migrations

from notifyflow import db

FUNCTION = """
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

# (app, model) of every history table; the step logs' table belongs to executions,
# whose migration 0004 guards it with this function.
TABLES = [("triggers", "TriggerStatusChange"), ("triggers", "EventRecord")]


def guard_sql(table: str) -> str:
    return (
        f'DROP TRIGGER IF EXISTS notifyflow_immutable ON "{table}"; '
        f'CREATE TRIGGER notifyflow_immutable BEFORE UPDATE OR DELETE ON "{table}" '
        "FOR EACH ROW EXECUTE FUNCTION notifyflow_history_immutable();"
    )


def install(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    # Executed with (empty) parameters: the message's % placeholders are doubled.
    schema_editor.execute(FUNCTION, params=[])
    for app, model in TABLES:
        schema_editor.execute(guard_sql(apps.get_model(app, model)._meta.db_table))


def uninstall(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    for app, model in TABLES:
        table = apps.get_model(app, model)._meta.db_table
        schema_editor.execute(f'DROP TRIGGER IF EXISTS notifyflow_immutable ON "{table}"')


class Migration(migrations.Migration):
    dependencies = [("triggers", "0010_scoped_api_keys")]

    operations = [migrations.RunPython(install, uninstall)]
