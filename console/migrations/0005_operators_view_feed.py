"""Let the ``operators`` group view the in-app feed: feed items and counters,
as it views every other model."""

from importlib import import_module

from django.db import migrations

# The grant of 0002, for the executions app's models (a module name starting with a digit).
grants = import_module("console.migrations.0002_operators_view_batches")
MODELS = ("feeditem", "feedcounter")


def _permissions(apps):
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("executions")
    previous = getattr(app_config, "models_module", None)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous
    Permission = apps.get_model("auth", "Permission")
    return list(
        Permission.objects.filter(
            content_type__app_label="executions", codename__in=[f"view_{m}" for m in MODELS]
        )
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
        ("console", "0004_operators_view_status_webhooks"),
        ("executions", "0012_feed"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
