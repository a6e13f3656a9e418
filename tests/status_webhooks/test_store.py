"""The deliverer's store: PostgreSQL's one-statement claim and record against their ORM
twins (the same rows, field by field), a message deleted while in flight, a lease lost
meanwhile, what a claim returns."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from status_webhooks.models import WebhookAttempt, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from status_webhooks.store import (
    DELIVERY_STORE,
    AttemptRecord,
    OrmDeliveryStore,
    PostgresDeliveryStore,
)
from tests.factories import WebhookEndpointFactory

pytestmark = [pytest.mark.django_db]

LEASE = timedelta(seconds=60)


def _events(n: int) -> None:
    record(
        events=[
            NewEvent(type="instance.completed", data={"n": i}, instance_id=uuid.uuid4())
            for i in range(n)
        ]
    )


def _record(message: WebhookMessage, *, status: str, code: int | None, now) -> AttemptRecord:
    return AttemptRecord(
        message_id=message.pk,
        lease=message.locked_until,
        attempted_at=now,
        status_code=code,
        duration_ms=7,
        excerpt="ok" if code == 200 else "",
        error="" if code == 200 else "HTTP 500",
        attempts=message.attempts + 1,
        status=status,
        next_attempt_at=now + timedelta(seconds=5) if status == "pending" else now,
        delivered_at=now if status == "delivered" else None,
    )


def _rows():
    messages = WebhookMessage.objects.order_by("sequence", "created_at").values_list(
        "status",
        "attempts",
        "locked_until",
        "last_status_code",
        "last_error",
        "delivered_at",
        "next_attempt_at",
    )
    attempts = WebhookAttempt.objects.order_by("attempted_at", "status_code").values_list(
        "attempted_at", "status_code", "duration_ms", "response_excerpt", "error"
    )
    endpoints = WebhookEndpoint.objects.values_list("failing_since", flat=True)
    return list(messages), list(attempts), list(endpoints)


def _scenario(store, now):
    """Claim three messages, lose one's lease, record a 200, a 500 and the lost one."""
    WebhookEndpointFactory(failing_since=now - timedelta(days=1))
    instance = uuid.uuid4()
    record(
        events=[NewEvent(type="instance.completed", instance_id=instance) for _ in range(3)],
        at=now - timedelta(seconds=1),
    )
    claimed = sorted(store.claim(now=now, lease=now + LEASE, limit=10), key=lambda m: m.sequence)
    assert [m.sequence for m in claimed] == [1, 2, 3]
    assert all(m.locked_until == now + LEASE for m in claimed)
    assert all(m.endpoint.url == "http://127.0.0.1:9/hook" for m in claimed)
    WebhookMessage.objects.filter(pk=claimed[2].pk).update(locked_until=now + 2 * LEASE)
    records = [
        _record(claimed[0], status="delivered", code=200, now=now),
        _record(claimed[1], status="pending", code=500, now=now),
        _record(claimed[2], status="delivered", code=200, now=now),
    ]
    held = store.record(records=records, healthy={claimed[0].endpoint_id})
    assert held == {claimed[0].pk, claimed[1].pk}
    return _rows()


@pytest.mark.postgres
def test_the_postgresql_statements_write_what_the_orm_writes():
    now = timezone.now()
    fast = _scenario(PostgresDeliveryStore(), now)
    WebhookEndpoint.objects.all().delete()
    slow = _scenario(OrmDeliveryStore(), now)
    assert fast == slow
    messages, attempts, endpoints = fast
    assert [m[0] for m in messages] == ["delivered", "pending", "pending"]
    assert len(attempts) == 3 and endpoints == [None]


@pytest.mark.postgres
def test_a_claim_and_a_record_are_one_statement_each_on_postgresql():
    WebhookEndpointFactory()
    _events(20)
    now = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        claimed = DELIVERY_STORE.claim(now=now, lease=now + LEASE, limit=50)
        records = [_record(m, status="delivered", code=200, now=now) for m in claimed]
        held = DELIVERY_STORE.record(records=records, healthy={claimed[0].endpoint_id})
    assert len(claimed) == 20 and len(held) == 20
    assert len(queries.captured_queries) == 2


@pytest.mark.both_databases
def test_a_message_deleted_in_flight_loses_its_attempt_and_the_others_are_recorded():
    endpoint = WebhookEndpointFactory()
    other = WebhookEndpointFactory()
    _events(1)  # one message to each endpoint
    now = timezone.now()
    claimed = DELIVERY_STORE.claim(now=now, lease=now + LEASE, limit=10)
    assert len(claimed) == 2
    endpoint.delete()  # its message goes with it
    records = [_record(m, status="delivered", code=200, now=now) for m in claimed]
    held = DELIVERY_STORE.record(records=records, healthy={other.pk})
    kept = WebhookMessage.objects.get()
    assert held == {kept.pk} and kept.status == "delivered"
    assert list(WebhookAttempt.objects.values_list("message_id", flat=True)) == [kept.pk]


@pytest.mark.both_databases
def test_a_claim_takes_due_unheld_messages_oldest_first_up_to_the_limit():
    WebhookEndpointFactory()
    _events(5)
    now = timezone.now()
    first = DELIVERY_STORE.claim(now=now, lease=now + LEASE, limit=3)
    second = DELIVERY_STORE.claim(now=now, lease=now + LEASE, limit=3)
    assert len(first) == 3 and len(second) == 2
    assert not {m.pk for m in first} & {m.pk for m in second}
    dues = [m.next_attempt_at for m in first]
    assert dues == sorted(dues) and max(dues) <= min(m.next_attempt_at for m in second)
    assert DELIVERY_STORE.claim(now=now, lease=now + LEASE, limit=3) == []
