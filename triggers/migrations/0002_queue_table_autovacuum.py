"""Keep the queue table from rotting: every claim changes ``status`` (no HOT update), so
dead index entries pile up at the head of the ready index. Default autovacuum waits for
20% of the table to be dead; on a large table claims slowed 3.4x within a minute
(queue-table rot, measured in bench/RESULTS.md). Vacuum on a fixed threshold, with no cost delay."""

from django.db import migrations

from notifyflow import db


def tune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute(
        "ALTER TABLE triggers_triggerinstance SET ("
        " autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,"
        " autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02,"
        " autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 50000)"
    )


def untune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute(
        "ALTER TABLE triggers_triggerinstance RESET ("
        " autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,"
        " autovacuum_vacuum_cost_delay, autovacuum_analyze_scale_factor,"
        " autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)"
    )


class Migration(migrations.Migration):
    dependencies = [("triggers", "0001_initial")]
    operations = [migrations.RunPython(tune, untune)]
