"""``send_push``: one call per device, routed by the device's provider - an Android phone
(FCM), an iPhone (APNs) and two browsers (Web Push) each get the message, each with its
own result."""

from __future__ import annotations

from executions.providers.push import PushMessage, send_push
from executions.providers.targets import TargetOutcome

MESSAGE = PushMessage(title="Hello", body="From every provider")


def test_each_device_is_sent_to_through_its_provider(fake_fcm, fake_apns, fake_webpush):
    fake_apns.by_token["dead" * 16] = (410, "Unregistered")
    devices = [
        ("fcm", "android-token"),
        ("apns", "ab" * 32),
        ("apns", "dead" * 16),
        ("webpush", fake_webpush.subscribe()),
        ("webpush", fake_webpush.subscribe()),
    ]
    results = [send_push(provider=p, token=t, message=MESSAGE) for p, t in devices]
    assert [(r.provider, r.outcome) for r in results] == [
        ("fcm", TargetOutcome.ACCEPTED),
        ("apns", TargetOutcome.ACCEPTED),
        ("apns", TargetOutcome.DEAD),
        ("webpush", TargetOutcome.ACCEPTED),
        ("webpush", TargetOutcome.ACCEPTED),
    ]
    assert [token for token, _ in fake_fcm.received] == ["android-token"]
    assert [token for token, _, _ in fake_apns.received] == ["ab" * 32, "dead" * 16]
    assert [payload["title"] for _, payload, _, _ in fake_webpush.received] == ["Hello"] * 2


def test_an_unknown_provider_or_a_token_of_the_wrong_shape_fails_without_a_request():
    assert send_push(provider="sms", token="x", message=MESSAGE).code == "unknown_provider"
    assert send_push(provider="fcm", token={"endpoint": "x"}, message=MESSAGE).code == (
        "invalid_token"
    )
