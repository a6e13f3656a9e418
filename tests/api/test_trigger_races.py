"""50 identical POSTs at once against a live server on real PostgreSQL."""

from __future__ import annotations

import threading

import pytest
import requests

from tests.factories import PAYLOAD, WorkflowFactory
from triggers.models import TriggerInstance

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_fifty_concurrent_identical_posts_create_one_instance(live_server):
    from api_keys.services import api_key_create

    workflow = WorkflowFactory()
    raw = api_key_create(name="race")[1]
    body = {"workflow": workflow.key, "idempotency_key": "same-key", "payload": PAYLOAD}
    barrier = threading.Barrier(50)
    results: list[tuple[int, str, str | None]] = []
    lock = threading.Lock()

    def fire():
        # Connect first (the test server's listen backlog is small), then race the POSTs.
        session = requests.Session()
        session.get(f"{live_server.url}/healthz", timeout=30)
        barrier.wait()
        response = session.post(
            f"{live_server.url}/api/v1/triggers/",
            json=body,
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        )
        with lock:
            results.append(
                (
                    response.status_code,
                    response.json().get("id"),
                    response.headers.get("Idempotent-Replayed"),
                )
            )

    threads = [threading.Thread(target=fire) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 50
    statuses = sorted(code for code, _, _ in results)
    assert statuses == [200] * 49 + [201]
    assert len({instance_id for _, instance_id, _ in results}) == 1
    assert all(replayed == "true" for code, _, replayed in results if code == 200)
    assert TriggerInstance.objects.filter(workflow=workflow).count() == 1
