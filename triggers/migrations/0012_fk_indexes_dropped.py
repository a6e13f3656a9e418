"""Drop the single-column indexes of foreign keys that another index already leads with
(or that no query uses: the instance's workflow version); see the models.

Only the indexes: AlterField would also drop and re-add the FOREIGN KEY constraints,
which re-validates every row of the largest tables under a lock. The names are
Django's deterministic ones, the same on every database."""

import django.db.models.deletion
from django.db import migrations, models

# (model, field, related model, related_name, on_delete, index dropped, its column)
DROPPED = [
    (
        "triggerinstance",
        "workflow",
        "workflows.workflow",
        "instances",
        "PROTECT",
        "triggers_triggerinstance_workflow_id_dd664b40",
        "workflow_id",
    ),
    (
        "triggerinstance",
        "workflow_version",
        "workflows.workflowversion",
        "instances",
        "PROTECT",
        "triggers_triggerinstance_workflow_version_id_a9cc1153",
        "workflow_version_id",
    ),
    (
        "triggerstatuschange",
        "instance",
        "triggers.triggerinstance",
        "status_changes",
        "CASCADE",
        "triggers_triggerstatuschange_instance_id_6b5c2f47",
        "instance_id",
    ),
    (
        "interest",
        "instance",
        "triggers.triggerinstance",
        "interests",
        "CASCADE",
        "triggers_interest_instance_id_1d000771",
        "instance_id",
    ),
    (
        "inboxevent",
        "instance",
        "triggers.triggerinstance",
        "inbox",
        "CASCADE",
        "triggers_inboxevent_instance_id_a78bec65",
        "instance_id",
    ),
    (
        "outboxevent",
        "instance",
        "triggers.triggerinstance",
        "outbox",
        "CASCADE",
        "triggers_outboxevent_instance_id_fa78d700",
        "instance_id",
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
        ("triggers", "0011_immutable_history"),
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
                            DROPPED,
                            [
                                "triggers_triggerinstance",
                                "triggers_triggerinstance",
                                "triggers_triggerstatuschange",
                                "triggers_interest",
                                "triggers_inboxevent",
                                "triggers_outboxevent",
                            ],
                            strict=True,
                        )
                    ],
                ),
            ],
        ),
    ]
