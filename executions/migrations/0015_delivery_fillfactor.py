"""Room on each delivery page for the row's later versions (PostgreSQL only).

A delivery row is written with its send's outcome and updated later: by each tracking
webhook (``tracking_status``), by a retry's outcome, and (a push or chat step) by its
results so far. None of these changes an indexed column unless it sets
``provider_message_id`` (delivery_provider_message_id), so each can be a HOT update (no
index entries) - but only if the new version fits on the row's page. At the default
fillfactor (100) a page is packed by the inserts, and unless pruning has already freed
space there (it cannot while any older snapshot is open) the update goes to another page
and writes an entry into every index."""

from django.db import migrations

from notifyflow import db


def tune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute("ALTER TABLE executions_delivery SET (fillfactor = 80)")


def untune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute("ALTER TABLE executions_delivery RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("executions", "0014_delivery_targets")]
    operations = [migrations.RunPython(tune, untune)]
