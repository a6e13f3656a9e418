"""The state machine's writes through Django's ORM (``OrmInstanceStore``: SQLite,
``make run``): each one transaction, without a savepoint (inside the engine's step
transaction it is all-or-nothing with it anyway, and a savepoint costs two round
trips)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from notifyflow.ids import uuid7
from status_webhooks import outbox
from workflows.models import Workflow

from ..models import Interest, TriggerInstance, TriggerStatus, TriggerStatusChange
from ..selectors import instance_by_key
from . import shapes
from .shapes import CREATED, Change, Join, NewInstance, Reported, Statement, as_model


def _concurrency_admits() -> Q:
    """PostgreSQL's ``CONCURRENCY_ADMITS`` as a condition of the claim's UPDATE: no key,
    or fewer executing steps of (workflow, key) than the workflow's limit now. SQLite
    runs one writer at a time, so the count inside the UPDATE cannot go stale."""
    running = (
        TriggerInstance.objects.order_by()
        .filter(
            workflow_id=OuterRef("workflow_id"),
            concurrency_key=OuterRef("concurrency_key"),
            status=TriggerStatus.PROCESSING,
        )
        .values("workflow_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        Q(concurrency_key__isnull=True)
        | Q(workflow__concurrency_limit__isnull=True)
        | Q(workflow__concurrency_limit__gt=Coalesce(Subquery(running), 0))
    )


def _insert(instance: TriggerInstance, actor: str, interests: Sequence[str], now: datetime) -> None:
    instance.save(force_insert=True)
    TriggerStatusChange.objects.create(
        instance=instance,
        from_status=CREATED[0],
        to_status=CREATED[1],
        reason="created",
        actor=actor[:200],
    )
    Interest.objects.bulk_create(
        [Interest(instance=instance, subject=subject) for subject in interests]
    )
    # Both saves stamped their own times (auto_now): the batch's ``now``, as on
    # PostgreSQL and as the caller answers.
    TriggerInstance.objects.filter(pk=instance.pk).update(created_at=now, updated_at=now)
    TriggerStatusChange.objects.filter(instance_id=instance.pk).update(at=now)


class OrmInstanceStore(shapes.InstanceStore):
    """The state machine's writes through the ORM, each one transaction."""

    def transition(
        self,
        change: Change,
        also: Sequence[Statement],
        durable: bool,
        events: Sequence[Reported] = (),
    ) -> bool:
        if also or any(when for _, when in events):
            raise ValueError("extra statements run only inside PostgreSQL's single statement")
        with transaction.atomic(savepoint=False):
            if TriggerInstance.objects.filter(**change.conditions).update(**change.values) != 1:
                return False
            if change.audited:
                TriggerStatusChange.objects.create(**change.audit)
            # The status events in the same transaction as the change they report.
            outbox.record(events=[event for event, _ in events], at=change.audit["at"])
        return True

    def claim(self, change: Change, join: Join | None) -> TriggerInstance | None:
        if join is not None:
            raise ValueError("a join is read only inside PostgreSQL's claim statement")
        with transaction.atomic(savepoint=False):
            claimable = (
                TriggerInstance.objects.filter(**change.conditions)
                .exclude(workflow__is_paused=True)
                .filter(_concurrency_admits())
            )
            if claimable.update(**change.values) != 1:
                return None
            if change.audited:
                TriggerStatusChange.objects.create(**change.audit)
        return TriggerInstance.objects.get(pk=change.conditions["pk"])

    def insert_many(self, rows: Sequence[NewInstance], now: datetime, actor: str) -> set[uuid.UUID]:
        inserted: set[uuid.UUID] = set()
        with transaction.atomic():
            for row in rows:
                try:
                    with transaction.atomic():
                        _insert(as_model(row, now), actor, row.interests, now)
                except IntegrityError:
                    continue
                inserted.add(row.id)
        return inserted

    def insert_for_recipients(
        self, row: NewInstance, recipient_ids: Sequence[str], now: datetime, actor: str
    ) -> list[str]:
        rows = [replace(row, id=uuid7(), recipient_id=rid) for rid in recipient_ids]
        inserted = self.insert_many(rows, now, actor)
        return [str(new.id) for new in rows if new.id in inserted]

    def insert_or_find(
        self, row: NewInstance, now: datetime, actor: str, workflow: Workflow
    ) -> tuple[bool, TriggerInstance | None]:
        if self.insert_many([row], now, actor):
            return True, None
        return False, instance_by_key(workflow=workflow, idempotency_key=row.idempotency_key)
