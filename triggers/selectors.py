"""Reads of trigger instances for operations (metrics, readiness). They never write."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min, Q
from django.utils import timezone

from notifyflow.metrics import QueueFigures

from .models import TriggerInstance, TriggerStatus

S = TriggerStatus


def queue_figures(*, now: datetime | None = None) -> QueueFigures:
    """Unfinished instances by status, the due backlog and the oldest due instance's age.

    Two aggregates, each over a partial index that holds only unfinished rows and every
    column it reads (index-only): trigger_due_enqueued (status = 'enqueued', by
    available_at) and trigger_lease_processing (status = 'processing', by
    locked_until). Finished instances cost nothing, however many there are.
    """
    now = now or timezone.now()
    enqueued = TriggerInstance.objects.filter(status=S.ENQUEUED).aggregate(
        total=Count("available_at"),
        due=Count("available_at", filter=Q(available_at__lte=now)),
        oldest=Min("available_at", filter=Q(available_at__lte=now)),
    )
    processing = TriggerInstance.objects.filter(status=S.PROCESSING).aggregate(
        total=Count("locked_until")
    )["total"]
    oldest = enqueued["oldest"]
    return QueueFigures(
        by_status={S.ENQUEUED: enqueued["total"], S.PROCESSING: processing},
        due_backlog=enqueued["due"],
        oldest_due_age_s=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
    )
