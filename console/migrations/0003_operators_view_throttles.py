"""Let the ``operators`` group view throttle counters, as it views batches;
resetting one needs the operate permission (the console's action)."""

from importlib import import_module

from django.db import migrations

# The grant of 0002, for another model (a module name starting with a digit).
grants = import_module("console.migrations.0002_operators_view_batches")
MODELS = ("throttlecounter",)


def _permissions(apps):
    grants._permissions(apps)  # creates the app's permissions (the new model's too)
    Permission = apps.get_model("auth", "Permission")
    codenames = [f"view_{m}" for m in MODELS]
    return list(
        Permission.objects.filter(content_type__app_label="triggers", codename__in=codenames)
    )


def grant_view(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name=grants.GROUP)
    group.permissions.add(*_permissions(apps))


def revoke_view(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    group = Group.objects.filter(name=grants.GROUP).first()
    if group is not None:
        group.permissions.remove(*_permissions(apps))


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0002_operators_view_batches"),
        ("triggers", "0018_merge_0017_batches_0017_throttle_counter"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
