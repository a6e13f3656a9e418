from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("triggers", "0023_trigger_is_test"),
    ]

    operations = [
        migrations.AddField(
            model_name="triggerinstance",
            name="locale",
            field=models.CharField(blank=True, max_length=35, null=True),
        ),
    ]
