"""Drop the workflow foreign key's own index: the (workflow, version) unique constraint
leads with it.

Only the indexes: AlterField would also drop and re-add the FOREIGN KEY constraints,
which re-validates every row of the largest tables under a lock. The names are
Django's deterministic ones, the same on every database."""

import django.db.models.deletion
from django.db import migrations, models

# (model, field, related model, related_name, on_delete, index dropped, its column)
DROPPED = [
    (
        "workflowversion",
        "workflow",
        "workflows.workflow",
        "versions",
        "PROTECT",
        "workflows_workflowversion_workflow_id_bbe86d4b",
        "workflow_id",
    ),
]


def _field(to: str, related_name: str, on_delete: str) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        on_delete=getattr(django.db.models.deletion, on_delete),
        related_name=related_name,
        to=to,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0004_protect_history"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=model, name=name, field=_field(to, related_name, on_delete)
                )
                for model, name, to, related_name, on_delete, _, _ in DROPPED
            ],
            database_operations=[
                migrations.RunSQL(
                    [f'DROP INDEX IF EXISTS "{index}"' for *_, index, _ in DROPPED],
                    reverse_sql=[
                        f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}")'
                        for (model, *_, index, column), table in zip(
                            DROPPED, ["workflows_workflowversion"], strict=True
                        )
                    ],
                ),
            ],
        ),
    ]
