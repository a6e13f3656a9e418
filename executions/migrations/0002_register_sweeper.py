"""Register the sweeper with django-celery-beat (idempotent: safe to run again)."""

from django.conf import settings
from django.db import migrations

TASK = "notifyflow.sweep"
NAME = "notifyflow: sweep (lost messages, expired leases, long delays)"


def register(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every = max(1, int(round(settings.NOTIFYFLOW_SWEEP_INTERVAL_S)))
    schedule, _ = IntervalSchedule.objects.get_or_create(every=every, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": schedule,
            "enabled": True,
            "description": "Re-dispatches due instances whose message was "
            "lost and recovers instances whose lease expired.",
        },
    )


def unregister(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(register, unregister)]
