"""Step logs cannot be updated or deleted through the database either (PostgreSQL):
the guard function of triggers 0010, whose only way past is the purge."""

from django.db import migrations

from notifyflow import db


def install(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    table = apps.get_model("executions", "StepExecutionLog")._meta.db_table
    schema_editor.execute(
        f'DROP TRIGGER IF EXISTS notifyflow_immutable ON "{table}"; '
        f'CREATE TRIGGER notifyflow_immutable BEFORE UPDATE OR DELETE ON "{table}" '
        "FOR EACH ROW EXECUTE FUNCTION notifyflow_history_immutable();"
    )


def uninstall(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    table = apps.get_model("executions", "StepExecutionLog")._meta.db_table
    schema_editor.execute(f'DROP TRIGGER IF EXISTS notifyflow_immutable ON "{table}"')


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0006_protect_history"),
        ("triggers", "0011_immutable_history"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
