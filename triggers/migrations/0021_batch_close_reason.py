"""How a batch closed, and by whom: ``Batch.close_reason`` and ``Batch.closed_by``.

Two nullable columns, no default: adding them rewrites no row, and every existing batch
keeps its values (its close reason is unknown: NULL, which the console says)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("triggers", "0020_concurrency_admits"),
    ]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="close_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("window", "its window ended"),
                    ("max_items", "max_items reached"),
                    ("flush", "flushed"),
                    ("run_now", "run now on its opener"),
                    ("opener_cancelled", "its opener was cancelled"),
                ],
                max_length=16,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="batch",
            name="closed_by",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
    ]
