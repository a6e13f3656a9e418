"""Push and chat through a real ``celery worker``, PostgreSQL and a broker, with the real
provider clients against the local fakes (APNs over HTTP/2 and TLS, FCM over HTTP/1.1
and TLS, a Web Push service that decrypts, Slack's Web API): a person with an Android
phone, an iPhone, two browsers and a Slack user, given inline in a trigger, gets one
workflow's ``push`` and ``chat`` steps on each, with the per-device results in the API
and the console; and a worker killed in the middle of a push resends to no device that
had accepted."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client

from executions.models import Delivery, StepExecutionLog
from recipients.models import PushDevice
from tests.admin_helpers import make_operator
from tests.fake_chat import FakeSlack
from tests.fake_push import FakeApns, FakeFcm
from tests.fake_tls import make_local_ca
from tests.fake_webpush import FakeWebPush
from tests.worker import celery_worker, flush_broker, kill9, wait_until
from triggers.models import TriggerInstance, TriggerStatus

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ANDROID = "android-token-ada:APA91bHPRgkFLJu6"
IPHONE = "11b95bad8e496b7bf85a1812d16ea0a9748ff5f49bfa9aaf99fb856e5db3018d"
DEFINITION = {
    "entry_node_id": "notify",
    "nodes": [
        {
            "id": "notify",
            "type": "push",
            "config": {
                "title": "Order {{ payload.order }} shipped",
                "body": "Arriving {{ payload.eta }}",
                "url": "https://shop.example.com/o/{{ payload.order }}",
                "data": {"order": "{{ payload.order }}"},
            },
        },
        {
            "id": "dm",
            "type": "chat",
            "config": {"text": "Order *{{ payload.order }}* shipped, arriving {{ payload.eta }}"},
        },
    ],
    "edges": [{"from": "notify", "to": "dm"}],
}


@dataclass
class Fakes:
    fcm: FakeFcm
    apns: FakeApns
    webpush: FakeWebPush
    slack: FakeSlack
    # The worker's environment that points its clients at them.
    env: dict[str, str]


@pytest.fixture
def fakes(tmp_path: Path, settings) -> Iterator[Fakes]:
    ca = make_local_ca(tmp_path / "ca")
    vapid = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp_path / "vapid.pem").write_bytes(vapid)
    with (
        FakeFcm(ca) as fcm,
        FakeApns(ca, key_id="ABC123DEFG", team_id="TEAM123456", topic="com.example.shop") as apns,
        FakeWebPush(ca) as webpush,
        FakeSlack() as slack,
    ):
        push_service = webpush.origin.removeprefix("https://")
        # The API checks a browser's endpoint against the list when the device is saved.
        settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = [push_service]
        env = {
            **fcm.settings(tmp_path),
            **apns.settings(tmp_path),
            "SSL_CERT_FILE": str(ca.ca_file),
            "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS": push_service,
            "NOTIFYFLOW_VAPID_PRIVATE_KEY": str(tmp_path / "vapid.pem"),
            "NOTIFYFLOW_VAPID_SUBJECT": "mailto:ops@example.com",
            "NOTIFYFLOW_SLACK_BOT_TOKEN": slack.token,
            "NOTIFYFLOW_SLACK_API_URL": slack.url,
        }
        try:
            yield Fakes(fcm, apns, webpush, slack, {k: str(v) for k, v in env.items()})
        finally:
            webpush.release.set()


def sid(subscription: dict) -> str:
    return subscription["endpoint"].rsplit("/", 1)[1]


def trigger(api, devices: list[dict], key: str) -> str:
    """The workflow (saved once) triggered for Ada with her devices and Slack user; the
    instance's id."""
    if api.get("/api/v1/workflows/shipped/").status_code == 404:
        saved = api.post(
            "/api/v1/workflows/",
            {"key": "shipped", "name": "Shipped", "definition": DEFINITION},
            format="json",
        )
        assert saved.status_code == 201, saved.json()
    person = {
        "id": "ada",
        "timezone": "Europe/Paris",
        "channel_data": {
            "push": {"devices": devices},
            "chat": {"connections": [{"provider": "slack", "user": "U0ADA"}]},
        },
    }
    created = api.post(
        "/api/v1/triggers/",
        {
            "workflow": "shipped",
            "idempotency_key": key,
            "payload": {"order": 42, "eta": "Tuesday"},
            "recipients": [person],
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    return created.json()["instances"][0]["id"]


def finished(instance_id: str) -> bool:
    return TriggerInstance.objects.filter(
        pk=instance_id, status__in=[TriggerStatus.COMPLETED, TriggerStatus.FAILED]
    ).exists()


def recorded(instance_id: str) -> dict[str, str]:
    """The push delivery's results as they are committed now, by device id."""
    row = Delivery.objects.filter(instance_id=instance_id, node_id="notify").first()
    return {key: r["outcome"] for key, r in ((row.targets if row else None) or {}).items()}


def device_ids() -> dict[str, str]:
    """Ada's device ids by token (a browser's: its endpoint)."""
    return {token: str(pk) for pk, token in PushDevice.objects.values_list("pk", "token")}


def test_a_person_gets_push_on_every_device_and_chat_on_slack(tmp_path, fakes, api):
    flush_broker()
    laptop, tablet = fakes.webpush.subscribe(), fakes.webpush.subscribe()
    devices = [
        {"provider": "fcm", "token": ANDROID, "timezone": "Europe/Paris"},
        {"provider": "apns", "token": IPHONE},
        {"provider": "webpush", "token": laptop},
        {"provider": "webpush", "token": tablet},
    ]
    instance_id = trigger(api, devices, "order-42")
    with celery_worker(tmp_path, **fakes.env):
        wait_until(lambda: finished(instance_id), timeout=180, what="the instance to finish")
    assert TriggerInstance.objects.get(pk=instance_id).status == TriggerStatus.COMPLETED

    assert [token for token, _ in fakes.fcm.received] == [ANDROID]
    assert [token for token, _, _ in fakes.apns.received] == [IPHONE]
    # Each browser decrypted its own copy.
    assert sorted(s for s, _, _, _ in fakes.webpush.received) == sorted([sid(laptop), sid(tablet)])
    assert {p["title"] for _, p, _, _ in fakes.webpush.received} == {"Order 42 shipped"}
    ((call),) = fakes.slack.received
    assert (call["channel"], call["text"]) == ("U0ADA", "Order *42* shipped, arriving Tuesday")

    # The API: one delivery per step, a result per device.
    answer = api.get(f"/api/v1/triggers/{instance_id}/deliveries/").json()
    by_node = {d["node_id"]: d for d in answer["results"]}
    push = by_node["notify"]
    assert (push["channel"], push["status"]) == ("push", "sent")
    ids = device_ids()
    assert {key: r["outcome"] for key, r in push["targets"].items()} == {
        ids[ANDROID]: "accepted",
        ids[IPHONE]: "accepted",
        ids[laptop["endpoint"]]: "accepted",
        ids[tablet["endpoint"]]: "accepted",
    }
    assert {r["provider"] for r in push["targets"].values()} == {"fcm", "apns", "webpush"}
    assert all(r.get("message_id") for r in push["targets"].values())
    assert len(push["provider_attempts"]) == 4
    chat = by_node["dm"]
    assert [r["outcome"] for r in chat["targets"].values()] == ["accepted"]

    # The console's delivery page shows the same per-device table.
    console = Client()
    console.force_login(make_operator())
    page = console.get(f"/admin/executions/delivery/{push['id']}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("nf-status-accepted") == 4
    for device in PushDevice.objects.all():
        assert device.short_token in html and str(device.pk) in html


def test_a_worker_killed_mid_push_resends_to_no_device_that_had_accepted(
    tmp_path, fakes, api, capsys
):
    flush_broker()
    held = fakes.webpush.subscribe()
    devices = [
        {"provider": "fcm", "token": ANDROID},
        {"provider": "webpush", "token": held},  # its push service answers slowly
        {"provider": "apns", "token": IPHONE},
    ]
    fakes.webpush.hold.add(sid(held))
    instance_id = trigger(api, devices, "order-43")
    with celery_worker(tmp_path, name="doomed", **fakes.env) as worker:
        assert fakes.webpush.held.wait(180), "the browser's push never arrived"
        # The three calls went out at once; the browser's hangs. The phone's and the
        # iPhone's acceptances are recorded while its answer is awaited.
        ids = device_ids()
        wait_until(
            lambda: set(recorded(instance_id)) == {ids[ANDROID], ids[IPHONE]},
            timeout=60,
            what="the answered devices to be recorded",
        )
        at_kill = recorded(instance_id)
        kill9(worker)
    fakes.webpush.release.set()
    assert at_kill == {ids[ANDROID]: "accepted", ids[IPHONE]: "accepted"}
    with celery_worker(tmp_path, name="survivor", beat=True, **fakes.env):
        wait_until(lambda: finished(instance_id), timeout=300, what="the recovered instance")

    assert StepExecutionLog.objects.filter(trigger_id=instance_id, error_kind="lease_expired")
    assert TriggerInstance.objects.get(pk=instance_id).status == TriggerStatus.COMPLETED
    # Sent once to the phones, whose acceptances the killed worker had recorded; the
    # browser's push was in flight (its push service may have taken it: at least once).
    assert [token for token, _ in fakes.fcm.received] == [ANDROID]
    assert [token for token, _, _ in fakes.apns.received] == [IPHONE]
    assert 1 <= len(fakes.webpush.received) <= 2
    row = Delivery.objects.get(instance_id=instance_id, node_id="notify")
    assert row.status == "sent" and row.attempts == 2
    assert set(r["outcome"] for r in row.targets.values()) == {"accepted"}
    with capsys.disabled():
        print(
            f"\n[push kill -9] recorded at kill: {sorted(at_kill.values())}; sends: "
            f"fcm={len(fakes.fcm.received)} apns={len(fakes.apns.received)} "
            f"webpush={len(fakes.webpush.received)} (the one in flight); attempts={row.attempts}"
        )
