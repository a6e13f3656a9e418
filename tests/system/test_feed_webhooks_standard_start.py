"""Issue 28 from the outside, on the standard start (migrate, gunicorn, worker,
beat, plus the documented NOTIFYFLOW_PUBLIC_URL and NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS):
a workflow that writes to the in-app feed and sends an email; the recipient's front end
mints a feed token, polls ``counts/`` (ETag, 304), lists and reads the item; a status
webhook endpoint receives the instance's events, signed (checked with the independent
``standardwebhooks`` library), in per-instance sequence order, the first one retried
under the same ``webhook-id`` after the receiver answered 500."""

from __future__ import annotations

import json
from collections import defaultdict

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.fake_http import FakeEndpoint
from tests.system.test_people_standard_start import standard_start
from tests.worker import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.worker]

FLOW = {
    "key": "comment-notify",
    "name": "Comment notification",
    "definition": {
        "entry_node_id": "feed",
        "nodes": [
            {
                "id": "feed",
                "type": "in_app",
                "config": {
                    "title": "New comment on {{ payload.doc }}",
                    "body": "{{ payload.author }} wrote: {{ payload.text }}",
                    "url": "https://app.example.com/docs/{{ payload.doc }}",
                    "data": {"doc": "{{ payload.doc }}"},
                },
            },
            {
                "id": "mail",
                "type": "email",
                "config": {"subject": "New comment on {{ payload.doc }}", "body": "See the app"},
            },
        ],
        "edges": [{"from": "feed", "to": "mail"}],
    },
}
PAYLOAD = {"doc": "roadmap", "author": "Grace", "text": "Ship it"}


@pytest.mark.django_db(transaction=True)
def test_feed_and_status_webhooks_on_the_standard_start(tmp_path):
    with FakeEndpoint() as receiver:
        receiver.responses = [500]  # the first delivery fails, its retry must keep its id
        allowed = receiver.url.removeprefix("http://")
        with standard_start(tmp_path, "feed-hooks", NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=allowed) as (
            http,
            smtp,
        ):
            secret = _endpoint(http, receiver.url)
            instances = _trigger(http)
            _feed(http, base=str(http.base_url))
            _events(receiver, secret, instances)
            assert len(smtp.messages) == 1  # ada has an email address, bob has none


def _endpoint(http: httpx.Client, url: str) -> str:
    answer = http.post(
        "/api/v1/webhook-endpoints/",
        json={
            "url": f"{url}/notifyflow",
            "event_types": ["instance.completed", "step.skipped", "delivery.*"],
        },
    )
    assert answer.status_code == 201, answer.text
    secret = answer.json()["secret"]
    assert secret.startswith("whsec_")
    listed = http.get(f"/api/v1/webhook-endpoints/{answer.json()['id']}/").json()
    assert "secret" not in listed
    return secret


def _trigger(http: httpx.Client) -> dict[str, str]:
    assert http.post("/api/v1/workflows/", json=FLOW).status_code == 201
    assert http.put("/api/v1/recipients/ada/", json={"email": "ada@example.com"}).status_code == 201
    assert http.put("/api/v1/recipients/bob/", json={}).status_code == 201
    answer = http.post(
        "/api/v1/triggers/",
        json={
            "workflow": "comment-notify",
            "idempotency_key": "comment-1",
            "payload": PAYLOAD,
            "recipients": ["ada", "bob"],
        },
    )
    assert answer.status_code == 201, answer.text
    instances = {i["recipient"]: i["id"] for i in answer.json()["instances"]}

    def finished() -> bool:
        return all(
            http.get(f"/api/v1/triggers/{i}/").json()["status"] == "completed"
            for i in instances.values()
        )

    wait_until(finished, timeout=60, what="both instances completed")
    return instances


def _feed(http: httpx.Client, *, base: str) -> None:
    minted = http.post("/api/v1/recipients/ada/feed-token/")
    assert minted.status_code == 200, minted.text
    token = minted.json()["token"]
    with httpx.Client(
        base_url=base, timeout=30, headers={"Authorization": f"Bearer {token}"}
    ) as front_end:
        counts = front_end.get("/api/v1/feed/counts/")
        assert counts.status_code == 200, counts.text
        assert counts.json() == {"unread_count": 1, "unseen_count": 1}
        etag = counts.headers["ETag"]
        again = front_end.get("/api/v1/feed/counts/", headers={"If-None-Match": etag})
        assert again.status_code == 304

        feed = front_end.get("/api/v1/feed/").json()
        (item,) = feed["results"]
        assert item["title"] == "New comment on roadmap"
        assert item["body"] == "Grace wrote: Ship it"
        assert item["data"] == {"doc": "roadmap"} and item["read_at"] is None
        assert front_end.post(f"/api/v1/feed/{item['id']}/read/").status_code == 200
        after = front_end.get("/api/v1/feed/counts/", headers={"If-None-Match": etag})
        assert after.status_code == 200 and after.json()["unread_count"] == 0

        # A recipient token does nothing else; an API key cannot read a feed.
        assert front_end.get("/api/v1/triggers/").status_code == 401
    assert http.get("/api/v1/feed/").status_code in (401, 403)


def _events(receiver: FakeEndpoint, secret: str, instances: dict[str, str]) -> None:
    verifier = Webhook(secret)

    def delivered() -> list[dict]:
        events = {}
        for _method, _path, headers, body in list(receiver.received):
            lowered = {k.lower(): v for k, v in headers.items()}
            events[lowered["webhook-id"]] = (lowered, body)
        return [
            verifier.verify(body, headers) | {"_headers": headers}
            for headers, body in events.values()
        ]

    wanted = {
        ("instance.completed", instances["ada"]),
        ("instance.completed", instances["bob"]),
        ("delivery.sent", instances["ada"]),
        ("step.skipped", instances["bob"]),
    }

    def received_ids() -> list[str]:
        return [
            {k.lower(): v for k, v in headers.items()}["webhook-id"]
            for _m, _p, headers, _b in list(receiver.received)
        ]

    def all_in() -> bool:
        got = {(e["type"], e["data"]["instance_id"]) for e in delivered()}
        return wanted <= got and received_ids().count(received_ids()[0]) == 2

    # The retry of the refused first request comes 5 s after it.
    wait_until(all_in, timeout=60, what="the status events at the receiver, and the retry")
    events = delivered()
    ids = received_ids()
    # The first request got the 500: its retry came under the same webhook-id, and
    # nothing else was sent twice.
    assert ids.count(ids[0]) == 2, ids
    assert len(ids) == len(events) + 1 == len(set(ids)) + 1, ids
    by_instance: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for event in events:
        assert set(event) - {"_headers"} == {"id", "type", "created_at", "data"}
        assert event["id"] == event["_headers"]["webhook-id"]
        by_instance[event["data"]["instance_id"]].append((event["data"]["sequence"], event["type"]))
    for instance_id, seen in by_instance.items():
        numbers = sorted(n for n, _ in seen)
        assert numbers == list(range(1, len(numbers) + 1)), (instance_id, seen)
        assert sorted(seen)[-1][1] == "instance.completed", seen
    skipped = next(e for e in events if e["type"] == "step.skipped")
    assert skipped["data"]["reason"] == "missing_channel_data"
    assert "ada@example.com" not in json.dumps(events)
