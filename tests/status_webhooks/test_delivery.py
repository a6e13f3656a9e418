"""The deliverer against a real local HTTP receiver: signed POSTs an independent verifier
accepts, every attempt recorded, the retry schedule with the same webhook-id, the 5-day
disable, no redirect followed, the allow-list checked again at send, leases."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from executions import sweeper
from status_webhooks import delivery
from status_webhooks.endpoints import endpoint_enable, secret_rotate
from status_webhooks.models import EndpointChange, WebhookAttempt, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.factories import WebhookEndpointFactory
from tests.fake_http import FakeEndpoint

pytestmark = [pytest.mark.django_db]


class Clock:
    """``timezone.now`` moved by hand."""

    def __init__(self, monkeypatch) -> None:
        self.now = timezone.now()
        monkeypatch.setattr(timezone, "now", lambda: self.now)

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def receiver(settings):
    with FakeEndpoint() as fake:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{fake.port}"]
        yield fake


@pytest.fixture
def kicks(monkeypatch):
    """Deliverer tasks sent (countdowns), instead of the broker."""
    sent: list[float | None] = []

    def send(name, *args, countdown=None):
        sent.append(countdown)

    monkeypatch.setattr("status_webhooks.delivery.send_task_on_commit", send)
    monkeypatch.setattr("executions.sweeper.send_task_on_commit", send)
    return sent


def _completed(instance_id=None, **data) -> None:
    record(
        events=[
            NewEvent(
                type="instance.completed",
                data={"status": "completed", **data},
                instance_id=instance_id or uuid.uuid4(),
                workflow_key="welcome",
            )
        ]
    )


def _ids(receiver) -> list[str]:
    return [headers["webhook-id"] for _, _, headers, _ in receiver.received]


@pytest.mark.both_databases
def test_a_message_is_posted_signed_so_an_independent_verifier_accepts_it(receiver, kicks):
    endpoint = WebhookEndpointFactory(url=f"{receiver.url}/hooks")
    instance_id = uuid.uuid4()
    _completed(instance_id, note="hi")
    assert delivery.deliver_due() == {"delivered": 1}
    ((method, path, headers, body),) = receiver.received
    assert (method, path) == ("POST", "/hooks")
    event = Webhook(endpoint.secret).verify(body, headers)
    message = WebhookMessage.objects.get()
    assert headers["webhook-id"] == str(message.event_id) == event["id"]
    assert event["type"] == "instance.completed"
    assert event["data"] == {
        "status": "completed",
        "note": "hi",
        "instance_id": str(instance_id),
        "sequence": 1,
    }
    assert headers["Content-Type"] == "application/json"
    assert message.status == "delivered" and message.attempts == 1 and message.delivered_at
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code == 200 and attempt.response_excerpt == '{"ok": true}'
    assert attempt.error == "" and attempt.duration_ms >= 0
    assert not kicks  # nothing left to retry


@pytest.mark.both_databases
def test_a_retry_keeps_its_webhook_id_and_waits_five_seconds(receiver, kicks, monkeypatch):
    WebhookEndpointFactory(url=receiver.url)
    clock = Clock(monkeypatch)
    receiver.responses = [500]
    _completed()
    assert delivery.deliver_due() == {"pending": 1}
    message = WebhookMessage.objects.get()
    assert message.next_attempt_at == clock.now + timedelta(seconds=5)
    assert message.last_status_code == 500 and message.last_error == "HTTP 500"
    assert kicks and 4.9 < kicks[0] < 5.2  # a countdown task for the retry
    assert delivery.deliver_due() == {}  # not due yet
    clock.advance(seconds=5)
    assert delivery.deliver_due() == {"delivered": 1}
    first, second = _ids(receiver)
    assert first == second == str(message.event_id)
    assert [a.status_code for a in WebhookAttempt.objects.order_by("attempted_at")] == [500, 200]


def test_the_retry_schedule_then_failed_and_every_attempt_recorded(receiver, kicks, monkeypatch):
    WebhookEndpointFactory(url=receiver.url)
    clock = Clock(monkeypatch)
    receiver.responses = [503] * 20
    _completed()
    waits = []
    for _ in range(8):
        delivery.deliver_due()
        message = WebhookMessage.objects.get()
        if message.status == "pending":
            waits.append((message.next_attempt_at - clock.now).total_seconds())
            clock.now = message.next_attempt_at
    assert waits == [5, 300, 1800, 7200, 18000, 36000, 36000]
    assert message.status == "failed" and message.attempts == 8
    assert WebhookAttempt.objects.count() == 8 == len(receiver.received)
    assert len(set(_ids(receiver))) == 1
    # Retries past the broker horizon (10 min) get no countdown: the sweeper kicks them.
    assert kicks == [pytest.approx(5.05, abs=0.2), pytest.approx(300.05, abs=0.2)]


def test_a_claims_posts_go_out_at_most_parallel_posts_at_once(receiver, kicks):
    receiver.delay_s = 0.2  # long enough for concurrent POSTs to overlap
    WebhookEndpointFactory(url=f"{receiver.url}/hooks")
    for n in range(20):
        _completed(n=n)
    assert delivery.deliver_due() == {"delivered": 20}
    assert 1 < receiver.peak["hooks"] <= delivery.PARALLEL_POSTS
    assert sorted(json.loads(body)["data"]["n"] for *_, body in receiver.received) == list(
        range(20)
    )


def test_a_claim_to_a_slow_endpoint_takes_about_one_answer_per_parallel_posts(receiver, kicks):
    receiver.delay_s = 0.4
    WebhookEndpointFactory(url=f"{receiver.url}/hooks")
    for n in range(delivery.PARALLEL_POSTS):
        _completed(n=n)
    started = time.monotonic()
    assert delivery.deliver_due() == {"delivered": delivery.PARALLEL_POSTS}
    assert time.monotonic() - started < 2.0  # one after another: 3.2 s


def _fill_backlog(port: int) -> list[socket.socket]:
    """Connections until the listener's backlog is full (the next connect hangs)."""
    made: list[socket.socket] = []
    while len(made) < 10:
        try:
            made.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
        except TimeoutError:
            return made
    raise AssertionError("the backlog never filled")


def test_an_endpoint_that_cannot_be_reached_fails_its_claim_without_a_connect_each(
    receiver, settings, kicks
):
    settings.NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S = 0.5
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)  # a full backlog: connects to it hang, as to a host that drops them
    port = listener.getsockname()[1]
    filler = _fill_backlog(port)
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS.append(f"127.0.0.1:{port}")
    WebhookEndpointFactory(url=f"http://127.0.0.1:{port}/hooks")
    WebhookEndpointFactory(url=f"{receiver.url}/hooks")
    try:
        for n in range(6):
            _completed(n=n)
        started = time.monotonic()
        assert delivery.deliver_due() == {"pending": 6, "delivered": 6}
        assert time.monotonic() - started < 3 * 0.5  # one connect waited for, not six
    finally:
        for sock in filler:
            sock.close()
        listener.close()
    assert len(receiver.received) == 6


def test_a_timeout_and_a_refused_connection_are_failed_attempts(receiver, settings, kicks):
    settings.NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S = 0.3
    WebhookEndpointFactory(url=receiver.url)
    receiver.hold = threading.Event()
    _completed()
    assert delivery.deliver_due() == {"pending": 1}
    receiver.hold.set()
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None and attempt.error.startswith("timeout after 0.3 s")
    with FakeEndpoint() as gone:
        port = gone.port
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS.append(f"127.0.0.1:{port}")
    WebhookMessage.objects.all().delete()
    WebhookEndpoint.objects.update(url=f"http://127.0.0.1:{port}/")
    _completed()
    assert delivery.deliver_due() == {"pending": 1}
    assert "ConnectionRefusedError" in WebhookMessage.objects.get().last_error


def test_a_redirect_is_not_followed(receiver, settings, kicks):
    with FakeEndpoint() as elsewhere:
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS.append(f"127.0.0.1:{elsewhere.port}")
        WebhookEndpointFactory(url=receiver.url)
        receiver.responses = [(307, {"Location": f"{elsewhere.url}/stolen"})]
        _completed()
        assert delivery.deliver_due() == {"pending": 1}
        assert not elsewhere.received
    message = WebhookMessage.objects.get()
    assert message.last_status_code == 307
    assert "not followed" in message.last_error and "/stolen" in message.last_error


def test_a_host_no_longer_allowed_is_not_called_at_send(receiver, settings, kicks):
    WebhookEndpointFactory(url=receiver.url)
    _completed()
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    assert delivery.deliver_due() == {"pending": 1}
    assert not receiver.received
    attempt = WebhookAttempt.objects.get()
    assert "not allowed by NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS" in attempt.error


def test_receiver_down_then_up_loses_nothing_and_sends_nothing_twice(receiver, kicks, monkeypatch):
    WebhookEndpointFactory(url=receiver.url)
    clock = Clock(monkeypatch)
    receiver.responses = [503] * 6  # down for the first six POSTs
    for _ in range(6):
        _completed()
    delivery.deliver_due()
    assert WebhookMessage.objects.filter(status="pending").count() == 6
    for _ in range(3):
        clock.advance(minutes=10)
        delivery.deliver_due()
    assert WebhookMessage.objects.filter(status="delivered").count() == 6
    sent = Counter(_ids(receiver))
    assert len(sent) == 6 and set(sent.values()) == {2}  # one 503, then one 2xx each
    clock.advance(days=1)
    delivery.deliver_due()
    assert len(receiver.received) == 12


def test_an_endpoint_failing_for_five_days_is_disabled_by_the_system(receiver, kicks, monkeypatch):
    endpoint = WebhookEndpointFactory(url=receiver.url)
    clock = Clock(monkeypatch)
    receiver.responses = [500] * 100
    started = clock.now
    for _ in range(6):  # an event a day, each failing
        _completed()
        delivery.deliver_due()
        endpoint.refresh_from_db()
        assert endpoint.failing_since == started
        if clock.now - started < timedelta(days=5):
            assert endpoint.is_active
        clock.advance(days=1)
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.disabled_at is not None
    assert "5 days" in endpoint.disabled_reason
    change = EndpointChange.objects.get(action="disabled")
    assert change.actor == "system" and change.endpoint == endpoint
    # Its pending messages now fail without a POST.
    posts = len(receiver.received)
    clock.advance(hours=12)
    delivery.deliver_due()
    assert len(receiver.received) == posts
    assert not WebhookMessage.objects.filter(status="pending").exists()
    assert WebhookMessage.objects.filter(last_error="endpoint is disabled").exists()
    endpoint_enable(endpoint=endpoint, actor="ops")
    endpoint.refresh_from_db()
    assert endpoint.is_active and endpoint.failing_since is None and endpoint.disabled_at is None


def test_a_success_clears_failing_since(receiver, kicks, monkeypatch):
    endpoint = WebhookEndpointFactory(url=receiver.url)
    clock = Clock(monkeypatch)
    receiver.responses = [500]
    _completed()
    delivery.deliver_due()
    endpoint.refresh_from_db()
    assert endpoint.failing_since == clock.now
    clock.advance(seconds=5)
    delivery.deliver_due()
    endpoint.refresh_from_db()
    assert endpoint.failing_since is None


def test_after_a_rotation_both_secrets_sign_until_the_overlap_ends(receiver, kicks, monkeypatch):
    endpoint = WebhookEndpointFactory(url=receiver.url)
    old = endpoint.secret
    new = secret_rotate(endpoint=endpoint, actor="ops").secret
    clock = Clock(monkeypatch)
    _completed()
    delivery.deliver_due()
    _, _, headers, body = receiver.received[-1]
    assert len(headers["webhook-signature"].split()) == 2
    assert Webhook(old).verify(body, headers) == Webhook(new).verify(body, headers)
    clock.advance(hours=24, seconds=1)
    _completed()
    delivery.deliver_due()
    _, _, headers, body = receiver.received[-1]
    assert len(headers["webhook-signature"].split()) == 1
    assert Webhook(new).verify(body, headers)


@pytest.mark.both_databases
def test_a_leased_message_is_not_claimed_again_until_its_lease_runs_out(settings, monkeypatch):
    WebhookEndpointFactory()
    clock = Clock(monkeypatch)
    _completed()
    (claimed,) = delivery.messages_claim(now=clock.now, limit=10)
    assert claimed.locked_until == clock.now + timedelta(seconds=settings.NOTIFYFLOW_LEASE_S)
    assert delivery.messages_claim(now=clock.now, limit=10) == []
    assert not delivery.due_exists(now=clock.now)
    later = claimed.locked_until + timedelta(seconds=1)
    assert delivery.due_exists(now=later)
    (again,) = delivery.messages_claim(now=later, limit=10)
    assert again.event_id == claimed.event_id
    # The first deliverer's outcome comes too late: its lease is gone.
    outcome = delivery.Outcome(clock.now, 200, 5)
    assert delivery.outcome_record(message=claimed, outcome=outcome) == ""
    assert WebhookMessage.objects.get().status == "pending"


@pytest.mark.both_databases
def test_the_sweeper_kicks_the_deliverer_only_for_due_unheld_messages(kicks, monkeypatch):
    WebhookEndpointFactory()
    clock = Clock(monkeypatch)
    assert sweeper.status_webhooks_kick(now=clock.now) == 0
    _completed()
    assert sweeper.status_webhooks_kick(now=clock.now) == 1
    assert kicks == [None]
    delivery.messages_claim(now=clock.now, limit=1)
    assert sweeper.status_webhooks_kick(now=clock.now) == 0


def test_the_body_is_id_type_created_at_and_data(receiver, kicks):
    WebhookEndpointFactory(url=receiver.url, event_types=["recipient.unsubscribed"])
    record(events=[NewEvent(type="recipient.unsubscribed", data={"recipient_id": "r1"})])
    delivery.deliver_due()
    body = json.loads(receiver.received[0][3])
    assert set(body) == {"id", "type", "created_at", "data"}
    assert body["created_at"].endswith("Z") and body["data"] == {"recipient_id": "r1"}


def test_metrics_count_attempts_and_finished_messages_and_show_the_backlog(receiver, kicks):
    from tests.notifyflow.test_metrics import scrape, value

    WebhookEndpointFactory(url=receiver.url)
    before = scrape()
    receiver.responses = [500]
    _completed()
    _completed()
    delivery.deliver_due()
    after = scrape()
    attempts = "notifyflow_status_webhook_attempts_total"
    for outcome in ("delivered", "failed"):
        assert (
            value(after, attempts, outcome=outcome) - value(before, attempts, outcome=outcome) == 1
        )
    delivered = "notifyflow_status_webhook_messages_total"
    assert (
        value(after, delivered, status="delivered") - value(before, delivered, status="delivered")
        == 1
    )
    assert value(after, "notifyflow_status_webhook_pending") == 1
    assert value(after, "notifyflow_status_webhook_due") == 0  # its retry is 5 s away


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_deliverer_skips_rows_another_one_is_claiming_instead_of_waiting():
    from django.db import connection, transaction

    WebhookEndpointFactory()
    for _ in range(20):
        _completed()
    locked: list[str] = []
    holding, done = threading.Event(), threading.Event()

    def other_deliverer() -> None:
        try:
            with transaction.atomic():
                rows = WebhookMessage.objects.select_for_update().order_by("next_attempt_at")
                locked.extend(str(pk) for pk in rows.values_list("pk", flat=True)[:10])
                holding.set()
                done.wait(timeout=10)
        finally:
            connection.close()

    thread = threading.Thread(target=other_deliverer)
    thread.start()
    assert holding.wait(timeout=30)
    started = time.monotonic()
    claimed = [str(m.pk) for m in delivery.messages_claim(now=timezone.now(), limit=10)]
    waited = time.monotonic() - started
    done.set()
    thread.join()
    assert len(claimed) == 10 and not set(claimed) & set(locked)
    assert waited < 5  # not blocked behind the other transaction's row locks


@pytest.mark.both_databases
def test_a_pass_ends_with_a_claim_that_comes_back_short_not_an_empty_one(
    receiver, kicks, settings, monkeypatch
):
    settings.NOTIFYFLOW_STATUS_WEBHOOK_BATCH = 2
    WebhookEndpointFactory(url=receiver.url)
    for _ in range(5):
        _completed()
    claims: list[int] = []
    claim = delivery.messages_claim

    def counted(**kwargs):
        claims.append(len(batch := claim(**kwargs)))
        return batch

    monkeypatch.setattr(delivery, "messages_claim", counted)
    assert delivery.deliver_due() == {"delivered": 5}
    assert claims == [2, 2, 1]
    assert len(receiver.received) == 5
