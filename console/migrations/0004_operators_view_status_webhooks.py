"""Let the ``operators`` group view status webhook endpoints, their messages, attempts
and changes, as it views every other model; changing an endpoint (and its
actions: rotate, replay, enable) needs the endpoint change permission."""

from importlib import import_module

from django.db import migrations

# The grant of 0002, for another app (a module name starting with a digit).
grants = import_module("console.migrations.0002_operators_view_batches")
APP = "status_webhooks"
MODELS = ("webhookendpoint", "webhookmessage", "webhookattempt", "endpointchange")


def _permissions(apps):
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config(APP)
    previous = getattr(app_config, "models_module", None)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous
    Permission = apps.get_model("auth", "Permission")
    return list(
        Permission.objects.filter(
            content_type__app_label=APP, codename__in=[f"view_{m}" for m in MODELS]
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
        ("console", "0003_operators_view_throttles"),
        ("status_webhooks", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
