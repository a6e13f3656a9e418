"""Keeps the sweeper's django-celery-beat entry in step with the settings."""

from __future__ import annotations

from django.conf import settings

SWEEP_TASK = "notifyflow.sweep"
SWEEP_NAME = "notifyflow: sweep (lost messages, expired leases, long delays)"
PURGE_TASK = "notifyflow.purge_finished"
PURGE_NAME = "notifyflow: purge finished instances (NOTIFYFLOW_PURGE_AFTER_DAYS)"


def ensure_sweeper_schedule() -> None:
    """Create or update the periodic sweep (idempotent; run by beat at startup)."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every = max(1, int(round(settings.NOTIFYFLOW_SWEEP_INTERVAL_S)))
    schedule, _ = IntervalSchedule.objects.get_or_create(
        every=every, period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.update_or_create(
        name=SWEEP_NAME,
        defaults={"task": SWEEP_TASK, "interval": schedule, "enabled": True},
    )
    # The optional daily purge: enabled only while NOTIFYFLOW_PURGE_AFTER_DAYS > 0.
    daily, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.DAYS)
    PeriodicTask.objects.update_or_create(
        name=PURGE_NAME,
        defaults={
            "task": PURGE_TASK,
            "interval": daily,
            "enabled": settings.NOTIFYFLOW_PURGE_AFTER_DAYS > 0,
        },
    )
