"""Status webhooks under real ``celery worker`` processes, PostgreSQL and the broker,
against a real local receiver: delivered after commit with a signature an independent
verifier accepts (and nothing of a rolled-back transaction), a receiver down for a while
then up (nothing lost, nothing sent twice after its 2xx), and a worker killed with
``kill -9`` mid-delivery (another one sends the same webhook-id once the lease runs
out, kicked by the sweeper)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack

import pytest
from django.db import transaction
from standardwebhooks.webhooks import Webhook

from status_webhooks.models import WebhookAttempt, WebhookEndpoint, WebhookMessage
from status_webhooks.outbox import NewEvent, record
from tests.factories import WebhookEndpointFactory
from tests.fake_http import FakeEndpoint
from tests.worker import celery_worker, flush_broker, kill9, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _events(n: int) -> list[NewEvent]:
    instance_id = uuid.uuid4()
    return [
        NewEvent(type="instance.completed", data={"n": i}, instance_id=instance_id)
        for i in range(n)
    ]


def _delivered(n: int) -> bool:
    return WebhookMessage.objects.filter(status="delivered").count() >= n


def test_a_worker_delivers_after_commit_signed_and_never_a_rolled_back_event(tmp_path):
    flush_broker()
    with FakeEndpoint() as receiver:
        endpoint = WebhookEndpointFactory(url=f"{receiver.url}/in")
        allowed = f"127.0.0.1:{receiver.port}"
        with celery_worker(tmp_path, NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=allowed):
            with pytest.raises(RuntimeError), transaction.atomic():
                record(events=[NewEvent(type="instance.completed", data={"rolled": "back"})])
                raise RuntimeError("the change failed")
            with transaction.atomic():
                record(events=_events(3))
            wait_until(lambda: _delivered(3), timeout=120, what="3 deliveries")
            time.sleep(1)  # a second pass would have sent it by now
        verifier = Webhook(endpoint.secret)
        bodies = [verifier.verify(body, headers) for _, _, headers, body in receiver.received]
    assert sorted(b["data"]["sequence"] for b in bodies) == [1, 2, 3]
    assert all("rolled" not in b["data"] for b in bodies) and len(bodies) == 3
    assert WebhookAttempt.objects.count() == 3


def test_a_receiver_down_for_a_while_then_up_loses_nothing_and_gets_each_once(tmp_path):
    flush_broker()
    with FakeEndpoint() as gone:
        port = gone.port  # closed again: connections to it are refused
    WebhookEndpointFactory(url=f"http://127.0.0.1:{port}/in")
    with ExitStack() as stack:
        stack.enter_context(
            celery_worker(tmp_path, NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=f"127.0.0.1:{port}")
        )
        with transaction.atomic():
            record(events=_events(5))
        wait_until(
            lambda: WebhookAttempt.objects.count() >= 5, timeout=120, what="5 refused attempts"
        )
        assert not WebhookMessage.objects.filter(status="delivered").exists()
        receiver = stack.enter_context(FakeEndpoint(port=port))  # up again
        wait_until(lambda: _delivered(5), timeout=120, what="5 deliveries after the retry")
        time.sleep(6)  # past another retry interval: nothing more may come
        sent = Counter(headers["webhook-id"] for _, _, headers, _ in receiver.received)
    ids = {str(i) for i in WebhookMessage.objects.values_list("event_id", flat=True)}
    assert set(sent) == ids and set(sent.values()) == {1}
    assert all(m.attempts >= 2 and m.last_status_code == 200 for m in WebhookMessage.objects.all())


def test_a_worker_killed_mid_delivery_is_replaced_and_the_same_webhook_id_is_sent(tmp_path):
    flush_broker()
    with FakeEndpoint() as receiver:
        allowed = f"127.0.0.1:{receiver.port}"
        WebhookEndpointFactory(url=f"{receiver.url}/in")
        hold = receiver.hold = threading.Event()
        env = {
            "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS": allowed,
            # The POST's timeout (half the soft limit) outlasts the kill by far.
            "NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S": "8",
            "NOTIFYFLOW_STEP_TIME_LIMIT_S": "9",
            "NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S": "4",
        }
        with celery_worker(tmp_path, name="doomed", **env) as doomed:
            with transaction.atomic():
                record(events=_events(1))
            wait_until(lambda: receiver.arrived, timeout=120, interval=0.02, what="the POST")
            kill9(doomed)
        receiver.hold = None
        hold.set()  # the dead worker's request is answered into a closed socket
        message = WebhookMessage.objects.get()
        assert message.status == "pending" and message.locked_until is not None
        assert not WebhookAttempt.objects.exists()  # it died before recording anything
        with celery_worker(tmp_path, name="heir", beat=True, **env):
            wait_until(lambda: _delivered(1), timeout=120, what="the re-delivery")
        first = receiver.arrived[0]["webhook-id"]
    assert (
        [h["webhook-id"] for h in receiver.arrived] == [first, first] == [str(message.event_id)] * 2
    )
    message.refresh_from_db()
    assert message.attempts == 1 and message.delivered_at >= message.created_at
    assert WebhookEndpoint.objects.get().failing_since is None
