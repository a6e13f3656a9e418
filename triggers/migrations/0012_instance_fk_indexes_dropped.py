"""Drop the single-column indexes of TriggerInstance's two foreign keys (see the model).

Only the indexes: AlterField would also drop and re-add both FOREIGN KEY constraints,
which re-validates every row of the largest table under a lock. The names are Django's
deterministic ones, the same on every database."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (
    "triggers_triggerinstance_workflow_id_dd664b40",
    "triggers_triggerinstance_workflow_version_id_a9cc1153",
)


class Migration(migrations.Migration):
    dependencies = [
        ("triggers", "0011_immutable_history"),
        ("workflows", "0004_protect_history"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="triggerinstance",
                    name="workflow",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="instances",
                        to="workflows.workflow",
                    ),
                ),
                migrations.AlterField(
                    model_name="triggerinstance",
                    name="workflow_version",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="instances",
                        to="workflows.workflowversion",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    [f'DROP INDEX IF EXISTS "{name}"' for name in DROPPED],
                    reverse_sql=[
                        'CREATE INDEX IF NOT EXISTS "triggers_triggerinstance_workflow_id_dd664b40"'
                        ' ON "triggers_triggerinstance" ("workflow_id")',
                        "CREATE INDEX IF NOT EXISTS"
                        ' "triggers_triggerinstance_workflow_version_id_a9cc1153"'
                        ' ON "triggers_triggerinstance" ("workflow_version_id")',
                    ],
                ),
            ],
        ),
    ]
