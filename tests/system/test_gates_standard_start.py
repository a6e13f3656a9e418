"""Issue 27 from the outside, on the standard start (migrate, gunicorn, worker,
beat, nothing else but the documented NOTIFYFLOW_PUBLIC_URL): a send window and a
recipient's quiet hours defer an email until they open - timed on what the local SMTP
server receives - and the timeline says what it waits for; a digest of several comments
goes out once; a throttle lets ``limit`` through and is reset over the API."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.fake_smtp import FakeSmtpServer
from tests.system.test_people_standard_start import standard_start
from tests.worker import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.worker]
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
# How late after its opening a deferred email may reach the SMTP server: the parked
# instance's message is in the broker with a countdown to the opening.
LATENESS_S = 10.0


def mailbox(smtp: FakeSmtpServer) -> list[Message]:
    return [message_from_bytes(raw.replace(b"\r\n", b"\n")) for raw in list(smtp.messages)]


def single_email(key: str, **config) -> dict:
    return {
        "key": key,
        "name": key,
        "definition": {
            "entry_node_id": "mail",
            "nodes": [
                {
                    "id": "mail",
                    "type": "email",
                    "config": {"subject": f"{key} for {{{{ recipient.id }}}}", "body": "Hi"}
                    | config,
                }
            ],
            "edges": [],
        },
    }


@pytest.mark.django_db(transaction=True)
def test_gates_on_the_standard_start(tmp_path):
    with standard_start(tmp_path, "gates") as (http, smtp):
        _windows(http, smtp)
        _digest(http, smtp)
        _throttle(http, smtp)


def _next_minute(at_least_s: float) -> datetime:
    """The next whole UTC minute at least ``at_least_s`` away (a window opens there)."""
    now = datetime.now(UTC)
    opening = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while (opening - now).total_seconds() < at_least_s:
        opening += timedelta(minutes=1)
    return opening


def _windows(http: httpx.Client, smtp: FakeSmtpServer) -> None:
    """A send window opening at the next minute, and quiet hours ending then (in Tokyo),
    both defer their email to that minute: nothing reaches the SMTP server before it,
    each arrives within LATENESS_S after it, and meanwhile the timeline says
    ``send_window``."""
    opening = _next_minute(at_least_s=20)
    closing = opening + timedelta(minutes=30)
    window = {
        "days": EVERY_DAY,
        "from": opening.strftime("%H:%M"),
        "until": closing.strftime("%H:%M"),
        "timezone": "UTC",
    }
    flow = single_email("office-hours", send_window=window)
    assert http.post("/api/v1/workflows/", json=flow).status_code == 201
    assert http.post("/api/v1/workflows/", json=single_email("reminder")).status_code == 201
    tokyo = opening.astimezone(ZoneInfo("Asia/Tokyo"))
    quiet = {
        "from": (tokyo - timedelta(hours=2)).strftime("%H:%M"),
        "until": tokyo.strftime("%H:%M"),
    }
    person = {"email": "kei@example.com", "timezone": "Asia/Tokyo"}
    assert http.put("/api/v1/recipients/kei/", json=person).status_code == 201
    prefs = http.put("/api/v1/recipients/kei/preferences/", json={"quiet_hours": quiet})
    assert prefs.status_code == 200, prefs.text
    assert http.put("/api/v1/recipients/ada/", json={"email": "ada@example.com"}).status_code == 201

    ids = {}
    for workflow, who in (("office-hours", "ada"), ("reminder", "kei")):
        answer = http.post(
            "/api/v1/triggers/",
            json={"workflow": workflow, "idempotency_key": "w1", "recipients": [who]},
        )
        assert answer.status_code == 201, answer.text
        ids[workflow] = answer.json()["instances"][0]["id"]

    def parked(instance_id: str) -> bool:
        pending = http.get(f"/api/v1/triggers/{instance_id}/timeline/").json()["pending"]
        return bool(pending and pending["waiting_for"])

    for workflow, instance_id in ids.items():
        wait_until(lambda i=instance_id: parked(i), timeout=30, what=f"{workflow} parked")
        pending = http.get(f"/api/v1/triggers/{instance_id}/timeline/").json()["pending"]
        assert pending["waiting_for"]["kind"] == "send_window"
        due = datetime.fromisoformat(pending["due_at"].replace("Z", "+00:00"))
        assert due == opening, (workflow, pending)
    assert mailbox(smtp) == []

    arrived: dict[str, float] = {}
    deadline = opening + timedelta(seconds=LATENESS_S + 20)
    while len(arrived) < 2 and datetime.now(UTC) < deadline:
        for message in mailbox(smtp):
            arrived.setdefault(str(message["To"]), datetime.now(UTC).timestamp())
        time.sleep(0.1)
    assert set(arrived) == {"ada@example.com", "kei@example.com"}, arrived
    for who, at in arrived.items():
        late = at - opening.timestamp()
        print(f"{who}: deferred email arrived {late:+.2f} s after the window opened")
        assert 0 <= late <= LATENESS_S, (who, late)


def _digest(http: httpx.Client, smtp: FakeSmtpServer) -> None:
    """Five comments in a thread within the batch's window: one email, "5 new comments",
    the four joiners completed as ``batched``; the batch listed and its flush refused
    once closed."""
    flow = {
        "key": "thread-digest",
        "name": "Thread digest",
        "definition": {
            "entry_node_id": "collect",
            "nodes": [
                {
                    "id": "collect",
                    "type": "batch",
                    "config": {"window": "4s", "key": "{{ payload.thread }}"},
                },
                {
                    "id": "mail",
                    "type": "email",
                    "config": {
                        "subject": "{{ vars.batch_collect.count }} new comments",
                        "body": "Latest: {{ vars.batch_collect.last.text }}. All: "
                        "{{ vars.batch_collect.items | map: 'text' | join: ', ' }}",
                    },
                },
            ],
            "edges": [{"from": "collect", "to": "mail"}],
        },
    }
    assert http.post("/api/v1/workflows/", json=flow).status_code == 201
    before = len(mailbox(smtp))
    ids = []
    for n in range(5):
        answer = http.post(
            "/api/v1/triggers/",
            json={
                "workflow": "thread-digest",
                "idempotency_key": f"comment-{n}",
                "payload": {"thread": "t1", "text": f"comment {n}"},
                "recipients": ["ada"],
            },
        )
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["instances"][0]["id"])
    wait_until(
        lambda: http.get("/api/v1/batches/", params={"status": "open"}).json()["results"],
        timeout=30,
        what="the open batch",
    )

    def done() -> bool:
        rows = [http.get(f"/api/v1/triggers/{i}/").json()["status"] for i in ids]
        return rows == ["completed"] * 5

    wait_until(done, timeout=60, interval=0.5, what="the digest")
    digests = mailbox(smtp)[before:]
    assert [m["Subject"] for m in digests] == ["5 new comments"]
    # Arrival order is the order the two worker processes reached the batch, not the
    # POSTs' order: the last is the last of the items, whichever comment that was.
    latest, _, listed = digests[0].get_payload().strip().partition(". All: ")
    items = listed.split(", ")
    assert sorted(items) == [f"comment {n}" for n in range(5)]
    assert latest == f"Latest: {items[-1]}"
    (batch,) = http.get("/api/v1/batches/", params={"workflow": "thread-digest"}).json()["results"]
    assert (batch["status"], batch["item_count"]) == ("closed", 5)
    flushed = http.post(f"/api/v1/batches/{batch['id']}/flush/")
    assert flushed.status_code == 409 and flushed.json()["code"] == "not_open"
    skipped = http.get("/api/v1/step-logs/", params={"skip_reason": "batched"}).json()["results"]
    assert len(skipped) == 4


def _throttle(http: httpx.Client, smtp: FakeSmtpServer) -> None:
    """At most two promotions per person: the third is skipped ``throttled`` and ends;
    after a reset over the API the next one goes out."""
    flow = {
        "key": "promo",
        "name": "Promo",
        "definition": {
            "entry_node_id": "cap",
            "nodes": [
                {
                    "id": "cap",
                    "type": "throttle",
                    "config": {"limit": 2, "window": "1d", "scope": "recipient"},
                },
                {"id": "mail", "type": "email", "config": {"subject": "Promo", "body": "Hi"}},
            ],
            "edges": [{"from": "cap", "to": "mail"}],
        },
    }
    assert http.post("/api/v1/workflows/", json=flow).status_code == 201
    before = len(mailbox(smtp))

    def promo(n: int) -> str:
        answer = http.post(
            "/api/v1/triggers/",
            json={"workflow": "promo", "idempotency_key": f"p{n}", "recipients": ["ada"]},
        )
        assert answer.status_code == 201, answer.text
        instance = answer.json()["instances"][0]["id"]
        wait_until(
            lambda: http.get(f"/api/v1/triggers/{instance}/").json()["status"] == "completed",
            timeout=30,
            what=f"promo {n}",
        )
        return instance

    for n in range(3):
        promo(n)
    assert [m["Subject"] for m in mailbox(smtp)[before:]] == ["Promo", "Promo"]
    throttled = http.get("/api/v1/step-logs/", params={"skip_reason": "throttled"}).json()
    assert len(throttled["results"]) == 1
    reset = http.delete("/api/v1/throttles/", params={"scope": "recipient", "key": ""})
    assert reset.status_code == 200, reset.text
    promo(3)
    assert len(mailbox(smtp)[before:]) == 3
