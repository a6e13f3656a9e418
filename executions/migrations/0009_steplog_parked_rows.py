"""Step logs: mark the row of a node that parked the instance at itself (a wait with no
event yet, a delay at the end of the workflow), which is not an attempt; the stats
index leaves such rows out. Adding the column with a database default rewrites no row,
so the append-only guard (0007) is not involved. Rows written before this stay
unmarked."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0008_fk_indexes_dropped"),
        ("triggers", "0013_instance_id_uuid7"),
        ("workflows", "0005_fk_index_dropped"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="stepexecutionlog",
            name="steplog_workflow_node_success",
        ),
        migrations.AddField(
            model_name="stepexecutionlog",
            name="parked",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="parked the instance at this node (a wait, a delay at the end); not an attempt",
            ),
        ),
        migrations.AddIndex(
            model_name="stepexecutionlog",
            index=models.Index(
                condition=models.Q(("parked", False)),
                fields=["workflow", "node_id", "success"],
                name="steplog_workflow_node_success",
            ),
        ),
    ]
