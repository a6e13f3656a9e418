"""Issue 27 from the outside, on the standard start (SPEC §1: migrate, gunicorn, worker,
beat, nothing else but the documented NOTIFYFLOW_PUBLIC_URL): a send window and a
recipient's quiet hours defer an email until they open - timed on what the local SMTP
server receives - and the timeline says what it waits for; a digest of several comments
goes out once; a throttle lets ``limit`` through and is reset over the API."""

from __future__ import annotations

import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.fake_smtp import FakeSmtpServer
from tests.system.test_standard_start import (
    BIN,
    _answers,
    free_port,
    manage,
    production_env,
    started,
    wait_for_log,
)
from tests.worker import flush_broker, wait_until

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
    flush_broker()
    env = production_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env["NOTIFYFLOW_PUBLIC_URL"] = base
    smtp = FakeSmtpServer()
    env.update(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(smtp.port),
    )
    manage("migrate", "--noinput", env=env)
    key = manage("create_api_key", "gates", env=env).strip().splitlines()[-1]
    logs = {name: tmp_path / f"{name}.log" for name in ("web", "worker", "beat")}
    with ExitStack() as stack:
        stack.callback(smtp.close)
        web = stack.enter_context(
            started(
                [str(BIN / "gunicorn"), "notifyflow.wsgi:application", "-b", f"127.0.0.1:{port}"],
                env=env,
                log=logs["web"],
            )
        )
        worker = stack.enter_context(
            started(
                [str(BIN / "celery"), "-A", "notifyflow", "worker", "-l", "INFO"],
                env=env,
                log=logs["worker"],
            )
        )
        beat = stack.enter_context(
            started(
                [str(BIN / "celery"), "-A", "notifyflow", "beat"]
                + ["-S", "django_celery_beat.schedulers:DatabaseScheduler"]
                + ["-s", str(tmp_path / "beat-schedule")],
                env=env,
                log=logs["beat"],
            )
        )
        wait_for_log(worker, logs["worker"], "ready.")
        http = stack.enter_context(
            httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"})
        )
        wait_until(lambda: _answers(http, "/healthz"), timeout=60, what="gunicorn")
        _windows(http, smtp)
        for name, proc in (("web", web), ("worker", worker), ("beat", beat)):
            assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-4000:]}"
    assert "Internal Server Error" not in logs["web"].read_text()


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
