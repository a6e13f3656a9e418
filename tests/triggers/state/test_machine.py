from __future__ import annotations

import pytest

from tests.factories import TriggerInstanceFactory
from triggers.models import TriggerInstance, TriggerStatus, TriggerStatusChange
from triggers.state import ALLOWED_TRANSITIONS, IllegalTransition, transition

S = TriggerStatus
pytestmark = [pytest.mark.both_databases, pytest.mark.django_db]


def test_transition_table_is_the_documented_one():
    assert set(ALLOWED_TRANSITIONS) == {
        (S.ENQUEUED, S.PROCESSING),
        (S.PROCESSING, S.ENQUEUED),
        (S.PROCESSING, S.COMPLETED),
        (S.ENQUEUED, S.FAILED),
        (S.PROCESSING, S.FAILED),
        (S.FAILED, S.ENQUEUED),
        # run now: an operator's intervention, audited like a transition
        (S.ENQUEUED, S.ENQUEUED),
        (S.ENQUEUED, S.CANCELLED),
        (S.PROCESSING, S.CANCELLED),
        # a batch member parked in its batch completes when the batch closes
        (S.ENQUEUED, S.COMPLETED),
    }


@pytest.mark.parametrize(
    "pair",
    [
        (S.COMPLETED, S.ENQUEUED),
        (S.COMPLETED, S.FAILED),
        (S.CANCELLED, S.ENQUEUED),
        (S.FAILED, S.PROCESSING),
        (S.FAILED, S.COMPLETED),
    ],
)
def test_illegal_transition_raises_and_writes_nothing(pair):
    instance = TriggerInstanceFactory(status=pair[0])
    with pytest.raises(IllegalTransition):
        transition(
            instance_id=instance.pk, from_status=pair[0], to_status=pair[1], reason="x", actor="t"
        )
    instance.refresh_from_db()
    assert instance.status == pair[0]
    assert not TriggerStatusChange.objects.exists()


def test_transition_writes_audit_row_with_reason_and_actor():
    instance = TriggerInstanceFactory()
    assert transition(
        instance_id=instance.pk,
        from_status=S.ENQUEUED,
        to_status=S.FAILED,
        reason="operator gave up",
        actor="alice",
    )
    instance.refresh_from_db()
    assert instance.status == S.FAILED and instance.finished_at is not None
    change = TriggerStatusChange.objects.get()
    assert (change.from_status, change.to_status, change.reason, change.actor) == (
        "enqueued",
        "failed",
        "operator gave up",
        "alice",
    )


def test_transition_from_a_stale_status_changes_nothing():
    instance = TriggerInstanceFactory(status=S.COMPLETED)
    assert not transition(
        instance_id=instance.pk,
        from_status=S.ENQUEUED,
        to_status=S.PROCESSING,
        reason="claim",
        actor="w",
        updates={"lease_token": instance.pk, "locked_until": instance.available_at},
    )
    assert TriggerInstance.objects.get(pk=instance.pk).status == S.COMPLETED
    assert not TriggerStatusChange.objects.exists()


def test_lease_fence_rejects_a_write_from_a_recovered_lease():
    import uuid

    from django.utils import timezone

    instance = TriggerInstanceFactory(
        status=S.PROCESSING, lease_token=uuid.uuid4(), locked_until=timezone.now()
    )
    stale = uuid.uuid4()
    assert not transition(
        instance_id=instance.pk,
        from_status=S.PROCESSING,
        to_status=S.COMPLETED,
        reason="done",
        actor="zombie",
        lease_token=stale,
    )
    assert TriggerInstance.objects.get(pk=instance.pk).status == S.PROCESSING
    assert transition(
        instance_id=instance.pk,
        from_status=S.PROCESSING,
        to_status=S.COMPLETED,
        reason="done",
        actor="owner",
        lease_token=instance.lease_token,
    )
    done = TriggerInstance.objects.get(pk=instance.pk)
    assert done.status == S.COMPLETED and done.lease_token is None


def test_status_is_checked_by_the_database():
    from django.db import IntegrityError, transaction

    instance = TriggerInstanceFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        TriggerInstance.objects.filter(pk=instance.pk).update(status="bogus")
