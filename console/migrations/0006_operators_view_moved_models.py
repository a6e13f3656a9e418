"""The ``operators`` group views the models that moved to their own apps (API keys,
gates, the feed) as it did before. A database upgraded in place kept its grants (the
content types moved with the models); this grants them on a fresh database too, where
the earlier grants may have run after the move and found nothing under the old label."""

from django.db import migrations

GROUP = "operators"
MODELS = {
    "api_keys": ("apikey",),
    "gates": ("batch", "batchitem", "throttlecounter"),
    "feed": ("feeditem", "feedcounter"),
}


def _permissions(apps):
    from django.contrib.auth.management import create_permissions

    Permission = apps.get_model("auth", "Permission")
    found = []
    for label, models in MODELS.items():
        app_config = apps.get_app_config(label)
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


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0005_operators_view_feed"),
        ("api_keys", "0001_initial"),
        ("gates", "0001_initial"),
        ("feed", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant_view, migrations.RunPython.noop)]
