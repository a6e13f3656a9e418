"""GET /workflows/{key}/stats/ counts step logs per (workflow, node, success) from one
composite index (an index-only scan); the workflow foreign key's own index becomes
redundant (the composite leads with the column) and is dropped, so a step still writes
the same number of index entries.

The new index is built before the old one is dropped, so cascading deletes and the
admin's workflow filter always have an index. CREATE INDEX blocks writes to the table
while it builds (about 1 s per million rows, bench/RESULTS.md): on a large table,
migrate in a quiet moment.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0002_register_sweeper"),
        ("workflows", "0003_workflow_is_paused"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="stepexecutionlog",
            index=models.Index(
                fields=["workflow", "node_id", "success"], name="steplog_workflow_node_success"
            ),
        ),
        migrations.AlterField(
            model_name="stepexecutionlog",
            name="workflow",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="step_logs",
                to="workflows.workflow",
            ),
        ),
    ]
