"""Room on each message page for the lease's version of its rows (PostgreSQL only).

The deliverer's claim sets ``locked_until``, which no index holds, so it can be a HOT
update (no index entries) - but only if the new version fits on the row's page. At the
default fillfactor (100) the outbox's inserts pack a page and a claim of the rows on it
writes nearly every new version to another page and an entry into each of the table's
five indexes. A claim leases a page's rows together, in one statement, so the room it
needs is their size: half the page (``bench/RESULTS.md``, issue 44, fourth round, has
the WAL, HOT share and table size this was measured at). The record that follows
changes ``status``, which the due index's predicate reads: it is never HOT."""

from django.db import migrations

from notifyflow import db


def tune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute("ALTER TABLE status_webhooks_webhookmessage SET (fillfactor = 50)")


def untune(apps, schema_editor):
    if not db.is_postgres(schema_editor.connection):
        return
    schema_editor.execute("ALTER TABLE status_webhooks_webhookmessage RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("status_webhooks", "0003_fk_indexes_led_by_others")]
    operations = [migrations.RunPython(tune, untune)]
