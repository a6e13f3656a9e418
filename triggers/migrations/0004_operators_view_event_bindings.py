"""Let the ``operators`` group (workflows/migrations/0002_operators_group.py) view
workflow triggers and received events, as it views every other model. Idempotent and
independent of the order the two migrations run in: both get_or_create the group."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "operators"
MODELS = ("workflowtrigger", "eventrecord")


def grant_view(apps, schema_editor):
    app_config = apps.get_app_config("triggers")
    # create_permissions skips an app config without a models module, which a
    # historical app config lacks; point it at something truthy for the call.
    previous = getattr(app_config, "models_module", None)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="triggers",
            codename__in=[f"view_{model}" for model in MODELS],
        )
    )


def revoke_view(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(
            *Permission.objects.filter(
                content_type__app_label="triggers",
                codename__in=[f"view_{model}" for model in MODELS],
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("triggers", "0003_workflow_trigger_event_record"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
