"""New instances get time-ordered ids (notifyflow.ids.uuid7). The default is Python's,
so nothing changes in the database (SQLite would otherwise rebuild the table)."""

from django.db import migrations, models

import notifyflow.ids


class Migration(migrations.Migration):
    dependencies = [
        ("triggers", "0012_fk_indexes_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="triggerinstance",
                    name="id",
                    field=models.UUIDField(
                        default=notifyflow.ids.uuid7,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
            ],
        ),
    ]
