"""Let the ``operators`` group (workflows/migrations/0002_operators_group.py) view the
people - recipients, lists, memberships, opt-outs - and list fan-outs, as it
views every other model: view only (the console's edits and the "erase" action are for
administrators). The console owns this grant because it owns the admin (the console app
has no models: this migration only writes permissions). Idempotent, and independent of
the order the migrations run in: both get_or_create the group."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "operators"
VIEWS = {
    "recipients": ("recipient", "recipientlist", "listmembership", "optout"),
    "triggers": ("fanout",),
}


def _create_permissions(apps, label):
    app_config = apps.get_app_config(label)
    # create_permissions skips an app config without a models module, which a
    # historical app config lacks; point it at something truthy for the call.
    previous = getattr(app_config, "models_module", None)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous


def _permissions(apps):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for label, models in VIEWS.items()
        for permission in Permission.objects.filter(
            content_type__app_label=label, codename__in=[f"view_{model}" for model in models]
        )
    ]


def grant_view(apps, schema_editor):
    for label in VIEWS:
        _create_permissions(apps, label)
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(*_permissions(apps))


def revoke_view(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(*_permissions(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("recipients", "0001_recipients"),
        ("triggers", "0015_instance_recipient_fanout"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
