"""Let the ``operators`` group view batches and their items, as it views
every other model; flushing needs the operate permission (the console's actions)."""

from django.db import migrations


GROUP = "operators"
MODELS = ("batch", "batchitem")


def _permissions(apps):
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("triggers")
    previous = getattr(app_config, "models_module", None)
    app_config.models_module = previous or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = previous
    Permission = apps.get_model("auth", "Permission")
    return list(
        Permission.objects.filter(
            content_type__app_label="triggers", codename__in=[f"view_{m}" for m in MODELS]
        )
    )


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
        ("console", "0001_operators_view_people"),
        ("triggers", "0017_batches"),
    ]

    operations = [migrations.RunPython(grant_view, revoke_view)]
