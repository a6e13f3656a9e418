"""Indexes a step's updates no longer write: the list-by-status index holds finished rows
only (one entry per instance, when it finishes, instead of one per claim and outcome),
and retention's oldest-finished-first scan gets a partial index of its own."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("triggers", "0024_triggerinstance_locale")]

    operations = [
        migrations.RemoveIndex(model_name="triggerinstance", name="trigger_status_created"),
        migrations.AddIndex(
            model_name="triggerinstance",
            index=models.Index(
                condition=models.Q(("status__in", ["cancelled", "completed", "failed"])),
                fields=["status", "-created_at"],
                name="trigger_finished_status",
            ),
        ),
        migrations.AddIndex(
            model_name="triggerinstance",
            index=models.Index(
                condition=models.Q(("status__in", ["cancelled", "completed", "failed"])),
                fields=["finished_at"],
                name="trigger_finished_at",
            ),
        ),
    ]
