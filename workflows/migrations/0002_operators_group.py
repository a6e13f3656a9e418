"""The ``operators`` group: view everything in the console, retry / run now, change nothing.

Permissions are normally created after all migrations (post_migrate), so they are
created here first for the apps involved. The retry/run-now permission,
``triggers.operate_triggerinstance``, is declared nowhere in a model's Meta (that would
mean a change to triggers/models.py): this migration creates the row on
TriggerInstance's content type, and ModelBackend resolves it from the row like any
other permission. ``create_operators_group`` is idempotent; the tests call it again
after a transactional test has flushed the tables.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "operators"
APP_LABELS = ("workflows", "triggers", "executions")
OPERATE = ("operate_triggerinstance", "Can retry and run trigger instances")


def create_operators_group(apps, schema_editor):
    for label in APP_LABELS:
        app_config = apps.get_app_config(label)
        # A historical app config has no models module, and create_permissions skips
        # those; point it at something truthy for the duration of the call.
        previous = getattr(app_config, "models_module", None)
        app_config.models_module = previous or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = previous

    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")

    instance_ct = ContentType.objects.get(app_label="triggers", model="triggerinstance")
    operate, _ = Permission.objects.get_or_create(
        content_type=instance_ct, codename=OPERATE[0], defaults={"name": OPERATE[1]}
    )
    # The models this migration's state knows; models added later by other migrations
    # add their view permission to the group in their own migration.
    views = [
        Permission.objects.get(
            content_type=ContentType.objects.get(app_label=label, model=model._meta.model_name),
            codename=f"view_{model._meta.model_name}",
        )
        for label in APP_LABELS
        for model in apps.get_app_config(label).get_models()
    ]
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(operate, *views)


def remove_operators_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    Group.objects.filter(name=GROUP).delete()
    Permission.objects.filter(content_type__app_label="triggers", codename=OPERATE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("workflows", "0001_initial"),
        ("triggers", "0001_initial"),
        ("executions", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_operators_group, remove_operators_group)]
