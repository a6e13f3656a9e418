"""Issue 26 from the outside, on the standard start (migrate, gunicorn, worker,
beat, nothing else but the documented NOTIFYFLOW_PUBLIC_URL): the people-first walk
of docs/how-it-works.md over HTTP - recipients, a list, a trigger to the list and to an
inline recipient, the fan-out's progress, what the local SMTP server receives (the RFC 8058
headers included), one-click unsubscribe honoured by the next send, skips counted in
/metrics, erasure."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from email import message_from_bytes
from email.message import Message
from pathlib import Path

import httpx
import pytest

from tests.fake_smtp import FakeSmtpServer
from tests.system.test_standard_start import (
    BIN,
    _answers,
    free_port,
    manage,
    production_env,
    samples,
    started,
    wait_for_log,
)
from tests.worker import flush_broker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.worker]

NEWS = {
    "key": "weekly-news",
    "name": "Weekly news",
    "categories": ["newsletter"],
    "definition": {
        "entry_node_id": "mail",
        "nodes": [
            {
                "id": "mail",
                "type": "email",
                # No `to`: the recipient's own address.
                "config": {
                    "subject": "News for {{ recipient.properties.first_name | default: 'you' }}",
                    "body": "{{ payload.headline }}\nUnsubscribe: {{ unsubscribe_url }}",
                },
            }
        ],
        "edges": [],
    },
}


def mailbox(smtp: FakeSmtpServer) -> list[Message]:
    """Every message the local SMTP server received, as the worker's SMTP client sent it."""
    return [message_from_bytes(raw.replace(b"\r\n", b"\n")) for raw in list(smtp.messages)]


def to_of(message: Message) -> str:
    return str(message["To"])


@contextmanager
def standard_start(
    tmp_path: Path, key_name: str, **settings: str
) -> Iterator[tuple[httpx.Client, FakeSmtpServer]]:
    """The product started the standard way - migrate, gunicorn, ``celery worker``,
    ``celery beat`` - plus the documented NOTIFYFLOW_PUBLIC_URL, the worker sending with
    Django's SMTP backend to a local SMTP server, and any documented ``settings`` the
    walk needs (environment variables). Yields an API client (a new key) and
    that server; after the block, every process must still run and the web log show no
    500."""
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
        **settings,
    )
    manage("migrate", "--noinput", env=env)
    key = manage("create_api_key", key_name, env=env).strip().splitlines()[-1]
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
        yield http, smtp
        for name, proc in (("web", web), ("worker", worker), ("beat", beat)):
            assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-4000:]}"
    assert "Internal Server Error" not in logs["web"].read_text()


@pytest.mark.django_db(transaction=True)
def test_people_first_walk_on_the_standard_start(tmp_path):
    with standard_start(tmp_path, "people") as (http, smtp):
        _walk(http, smtp)
        _priority_lanes(http, smtp)


RESET = {
    "key": "password-reset",
    "name": "Password reset",
    "critical": True,
    "priority": "critical",
    "definition": {
        "entry_node_id": "mail",
        "nodes": [{"id": "mail", "type": "email", "config": {"subject": "Reset", "body": "b"}}],
        "edges": [],
    },
}


def _priority_lanes(http: httpx.Client, mail: FakeSmtpServer) -> None:
    """Priority lanes on the standard start: a critical workflow's trigger runs on the plain
    worker (its lane's queue is consumed), and /readyz reports every lane."""
    created = http.post("/api/v1/workflows/", json=RESET)
    assert created.status_code == 201 and created.json()["priority"] == "critical", created.text
    body = {"workflow": "password-reset", "idempotency_key": "r1", "payload": {}}
    eve = {"id": "eve", "email": "eve@example.com"}
    answer = http.post("/api/v1/triggers/", json={**body, "recipients": [eve]})
    assert answer.status_code == 201, answer.text
    (instance,) = answer.json()["instances"]
    wait_until(
        lambda: http.get(f"/api/v1/triggers/{instance['id']}/").json()["status"] == "completed",
        timeout=60,
        what="the critical instance",
    )
    assert [to_of(m) for m in mailbox(mail) if m["Subject"] == "Reset"] == ["eve@example.com"]
    lanes = http.get("/readyz").json()["lanes"]
    assert list(lanes) == ["critical", "high", "normal", "bulk"]


def _walk(http: httpx.Client, mail: FakeSmtpServer) -> None:
    created = http.post("/api/v1/workflows/", json=NEWS)
    assert created.status_code == 201, created.text
    ada = {
        "email": "ada@example.com",
        "timezone": "Europe/London",
        "properties": {"first_name": "Ada"},
    }
    assert http.put("/api/v1/recipients/ada/", json=ada).status_code == 201
    assert http.put("/api/v1/lists/readers/", json={"name": "Readers"}).status_code == 201
    members = http.post("/api/v1/lists/readers/members/", json={"recipients": ["ada", "bob", "cy"]})
    assert members.status_code in (200, 201), members.text
    # bob was created empty by the membership; he gets an address now. cy has none.
    assert (
        http.patch("/api/v1/recipients/bob/", json={"email": "bob@example.com"}).status_code == 200
    )

    body = {
        "workflow": "weekly-news",
        "idempotency_key": "issue-1",
        "payload": {"headline": "Hello, people"},
        "recipients": [{"list": "readers"}, {"id": "dan", "email": "dan@example.com"}, "ada"],
    }
    answer = http.post("/api/v1/triggers/", json=body)
    assert answer.status_code == 201, answer.text
    sent = answer.json()
    # Inline and named recipients now; the list's others through the fan-out.
    assert {(i["recipient"], i["status"]) for i in sent["instances"]} == {
        ("dan", "created"),
        ("ada", "created"),
    }
    fanout_url = f"/api/v1/fanouts/{sent['fanout']['id']}/"
    wait_until(
        lambda: http.get(fanout_url).json()["status"] == "done", timeout=60, what="the fan-out"
    )
    progress = http.get(fanout_url).json()
    assert progress["created"] == 2, progress  # bob and cy: ada was named inline too

    def finished() -> bool:
        page = http.get("/api/v1/triggers/", params={"workflow": "weekly-news"}).json()
        rows = page["results"]
        return len(rows) == 4 and all(row["status"] == "completed" for row in rows)

    wait_until(finished, timeout=120, interval=0.5, what="four completed instances")
    received = {to_of(m): m for m in mailbox(mail)}
    assert set(received) == {"ada@example.com", "bob@example.com", "dan@example.com"}
    ada_mail = received["ada@example.com"]
    assert ada_mail["Subject"] == "News for Ada"
    assert ada_mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = re.fullmatch(r"<(.+)>", ada_mail["List-Unsubscribe"].strip()).group(1)
    assert link.startswith(str(http.base_url).rstrip("/") + "/u/")
    assert link in ada_mail.get_payload()
    skipped = http.get("/api/v1/step-logs/", params={"skip_reason": "missing_channel_data"})
    assert [row["trigger"] for row in skipped.json()["results"]] and skipped.status_code == 200

    # The same request again creates nothing.
    again = http.post("/api/v1/triggers/", json=body)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"

    # A link scanner's GET changes nothing; the one-click POST opts Ada out.
    anonymous = httpx.Client(timeout=30)
    assert anonymous.get(link).status_code == 200
    assert http.get("/api/v1/recipients/ada/preferences/").json().get("categories") in (None, {})
    one_click = anonymous.post(link, data={"List-Unsubscribe": "One-Click"})
    assert one_click.status_code == 200
    assert (
        anonymous.post(link[:-3] + "xx/", data={"List-Unsubscribe": "One-Click"}).status_code == 400
    )
    evaluated = http.get(
        "/api/v1/recipients/ada/preferences/evaluate/",
        params={"workflow": "weekly-news", "channel": "email"},
    ).json()
    assert evaluated == {"send": False, "rule": "categories.newsletter"}

    # The next send to Ada is skipped, and counted.
    before = len(mailbox(mail))
    next_one = http.post(
        "/api/v1/triggers/",
        json={
            "workflow": "weekly-news",
            "idempotency_key": "issue-2",
            "payload": {"headline": "2"},
            "recipients": ["ada"],
        },
    )
    instance = next_one.json()["instances"][0]["id"]
    wait_until(
        lambda: http.get(f"/api/v1/triggers/{instance}/").json()["status"] == "completed",
        timeout=60,
        what="the second send",
    )
    time.sleep(0.5)
    assert len(mailbox(mail)) == before
    steps = http.get(f"/api/v1/triggers/{instance}/steps/").json()["results"]
    assert [s["skip_reason"] for s in steps] == ["preference_opt_out"]
    counted = samples(http.get("/metrics").text)
    skip = ("notifyflow_steps_skipped_total", (("reason", "preference_opt_out"),))
    assert counted.get(skip, 0) >= 1

    # Erasure: the person is gone.
    assert http.delete("/api/v1/recipients/ada/").status_code == 204
    assert http.get("/api/v1/recipients/ada/").status_code == 404
    # Her address is gone from the deliveries too: nothing is found by it any more.
    by_address = http.get("/api/v1/triggers/", params={"recipient": "ada@example.com"})
    assert by_address.status_code == 200 and by_address.json()["results"] == []
    erased = http.get(f"/api/v1/triggers/{instance}/").json()
    assert (erased["recipient"], erased["recipient_erased"]) == (None, True)
