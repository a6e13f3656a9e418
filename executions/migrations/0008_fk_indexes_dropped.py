"""Drop the single-column indexes of foreign keys that another index already leads with;
see the models.

Only the indexes: AlterField would also drop and re-add the FOREIGN KEY constraints,
which re-validates every row of the largest tables under a lock. The names are
Django's deterministic ones, the same on every database."""

import django.db.models.deletion
from django.db import migrations, models

# (model, field, related model, related_name, on_delete, index dropped, its column)
DROPPED = [
    (
        "stepexecutionlog",
        "trigger",
        "triggers.triggerinstance",
        "step_logs",
        "CASCADE",
        "executions_stepexecutionlog_trigger_id_3625a9e9",
        "trigger_id",
    ),
    (
        "delivery",
        "instance",
        "triggers.triggerinstance",
        "deliveries",
        "CASCADE",
        "executions_delivery_instance_id_74790512",
        "instance_id",
    ),
    (
        "deliveryattempt",
        "delivery",
        "executions.delivery",
        "attempt_rows",
        "CASCADE",
        "executions_deliveryattempt_delivery_id_05006427",
        "delivery_id",
    ),
    (
        "deliveryevent",
        "delivery",
        "executions.delivery",
        "events",
        "CASCADE",
        "executions_deliveryevent_delivery_id_47322a7b",
        "delivery_id",
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
        ("executions", "0007_immutable_step_logs"),
        ("triggers", "0012_fk_indexes_dropped"),
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
                            DROPPED,
                            [
                                "executions_stepexecutionlog",
                                "executions_delivery",
                                "executions_deliveryattempt",
                                "executions_deliveryevent",
                            ],
                            strict=True,
                        )
                    ],
                ),
            ],
        ),
    ]
