"""The ``operators`` group views recipients' channel data - push devices, chat
connections and the audit of their removals - as it views the rest of the people: view
only (deleting one is for administrators). Idempotent, as the earlier grants."""

from django.db import migrations

GROUP = "operators"
MODELS = {"recipients": ("pushdevice", "chatconnection", "channeldataremoval")}


def _permissions(apps):
    from django.contrib.auth.management import create_permissions

    Permission = apps.get_model("auth", "Permission")
    found = []
    for label, models in MODELS.items():
        app_config = apps.get_app_config(label)
        # create_permissions skips an app config without a models module, which a
        # historical app config lacks; point it at something truthy for the call.
        previous = getattr(app_config, "models_module", None)
        app_config.models_module = previous or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = previous
        found += Permission.objects.filter(
            content_type__app_label=label, codename__in=[f"view_{m}" for m in models]
        )
    return found


def grant_view(apps, schema_editor):
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
        ("console", "0006_operators_view_moved_models"),
        ("recipients", "0003_channel_data"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
