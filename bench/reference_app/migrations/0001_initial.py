import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="RefTrigger",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("workflow_key", models.CharField(max_length=100)),
                ("idempotency_key", models.CharField(max_length=255)),
                ("payload", models.JSONField(default=dict)),
                ("status", models.CharField(default="enqueued", max_length=16)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workflow_key", "idempotency_key"), name="bench_ref_unique_key"
                    ),
                ],
            },
        ),
    ]
