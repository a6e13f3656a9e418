"""30 concurrent identical events through a live server: one instance per binding."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
import requests

from api_keys.services import api_key_create
from tests.factories import WorkflowTriggerFactory
from triggers.models import TriggerInstance

CONCURRENCY = 30


@pytest.mark.postgres
@pytest.mark.broker  # each created instance's message is published for real
def test_concurrent_identical_events_create_one_instance_per_binding(live_server, transactional_db):
    by_user = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        idempotency_setting={"strategy": "CONTEXT_BASED", "contextFields": ["userId"]},
    )
    by_event = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        idempotency_setting={
            "strategy": "EVENT_BASED",
            "includeEventType": True,
            "includeEventId": True,
        },
    )
    # Same workflow, different binding: the trigger id keeps their keys apart.
    same_workflow = WorkflowTriggerFactory(
        event_name="LEARNER_BATCH_ENROLLMENT",
        workflow=by_user.workflow,
        idempotency_setting={"strategy": "CONTEXT_BASED", "contextFields": ["userId"]},
    )
    bindings = [by_user, by_event, same_workflow]
    raw_key = api_key_create(name="race")[1]
    body = {
        "name": "LEARNER_BATCH_ENROLLMENT",
        "event_id": "event123",
        "context": {"userId": "user123", "sessionId": "s1"},
    }
    barrier = threading.Barrier(CONCURRENCY)
    responses: list[requests.Response] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def fire() -> None:
        try:
            with requests.Session() as session:
                session.headers["Authorization"] = f"Bearer {raw_key}"
                # Connect first (keep-alive), so the burst below is 30 requests racing in
                # the view rather than 30 TCP connects overflowing the test server's small
                # listen backlog. The warm-up GET is safe to repeat.
                for attempt in range(5):
                    try:
                        session.get(
                            f"{live_server.url}/api/v1/workflow-triggers/", timeout=30
                        ).raise_for_status()
                        break
                    except requests.ConnectionError:
                        if attempt == 4:
                            raise
                        time.sleep(0.2 * (attempt + 1))
                barrier.wait(timeout=30)
                response = session.post(f"{live_server.url}/api/v1/events/", json=body, timeout=60)
            with lock:
                responses.append(response)
        except BaseException as exc:  # noqa: BLE001 - reported below
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=fire) for _ in range(CONCURRENCY)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors, errors
    assert [r.status_code for r in responses] == [202] * CONCURRENCY, [
        r.text for r in responses if r.status_code != 202
    ]
    for binding in bindings:
        outcomes = [
            next(o for o in r.json()["outcomes"] if o["binding"] == binding.pk) for r in responses
        ]
        assert Counter(o["status"] for o in outcomes) == {
            "created": 1,
            "duplicate": CONCURRENCY - 1,
        }
        assert len({o["instance_id"] for o in outcomes}) == 1
        assert len({o["idempotency_key"] for o in outcomes}) == 1
    assert TriggerInstance.objects.filter(workflow=by_user.workflow).count() == 2
    assert TriggerInstance.objects.filter(workflow=by_event.workflow).count() == 1
