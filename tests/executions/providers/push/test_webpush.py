"""The Web Push client (pywebpush: VAPID and RFC 8291 encryption) against a local push
service that decrypts every payload with the subscription's private key and verifies the
VAPID JWT: the encryption is proven, not assumed."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization

from executions.providers import connections
from executions.providers.push import send_push, webpush
from executions.providers.push.message import PushMessage
from executions.providers.targets import TargetOutcome

MESSAGE = PushMessage(
    title="Your order shipped",
    body="It arrives Tuesday",
    url="https://shop.example.com/o/42",
    data={"order": 42},
    collapse_key="order-42",
)


def public_key_b64(vapid_key) -> str:
    raw = vapid_key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_the_push_service_decrypts_what_was_sent_and_verifies_vapid(fake_webpush, vapid_key):
    subscription = fake_webpush.subscribe()
    result = send_push(provider="webpush", token=subscription, message=MESSAGE)
    assert result.outcome == TargetOutcome.ACCEPTED and result.provider == "webpush"
    assert result.provider_message_id.startswith(f"{fake_webpush.origin}/message/")
    ((sid, payload, claims, vapid_public),) = fake_webpush.received
    assert payload == {
        "title": "Your order shipped",
        "body": "It arrives Tuesday",
        "url": "https://shop.example.com/o/42",
        "data": {"order": 42},
    }
    assert subscription["endpoint"].endswith(sid)
    assert claims["aud"] == fake_webpush.origin and claims["sub"] == "mailto:ops@example.com"
    assert vapid_public == public_key_b64(vapid_key)
    assert fake_webpush.refused == []


def test_a_subscription_given_as_json_text_is_sent_too(fake_webpush):
    import json

    subscription = json.dumps(fake_webpush.subscribe())
    assert send_push(provider="webpush", token=subscription, message=MESSAGE).accepted


def test_many_subscriptions_of_one_push_service_share_one_connection(fake_webpush):
    before = connections.connections_opened("webpush")
    subscriptions = [fake_webpush.subscribe() for _ in range(15)]
    results = [webpush.send(subscription=s, message=MESSAGE) for s in subscriptions]
    assert all(result.accepted for result in results)
    assert len(fake_webpush.received) == 15
    assert fake_webpush.tls_connections == 1
    assert connections.connections_opened("webpush") - before == 1


@pytest.mark.parametrize("status", [404, 410])
def test_an_expired_or_unsubscribed_subscription_is_dead(fake_webpush, status):
    fake_webpush.script = [status]
    result = webpush.send(subscription=fake_webpush.subscribe(), message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.DEAD, str(status))


def test_a_subscription_the_service_forgot_is_dead(fake_webpush):
    subscription = fake_webpush.subscribe()
    fake_webpush.gone.add(subscription["endpoint"].rsplit("/", 1)[1])
    assert webpush.send(subscription=subscription, message=MESSAGE).outcome == TargetOutcome.DEAD


def test_a_rate_limit_is_retried_after_what_the_service_said(fake_webpush):
    fake_webpush.script = [(429, {"Retry-After": "90"})]
    result = webpush.send(subscription=fake_webpush.subscribe(), message=MESSAGE)
    assert (result.outcome, result.code, result.retry_after_s) == (TargetOutcome.RETRY, "429", 90.0)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_transient(fake_webpush, status):
    fake_webpush.script = [status]
    result = webpush.send(subscription=fake_webpush.subscribe(), message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, str(status))


def test_a_payload_too_large_fails_and_keeps_the_subscription(fake_webpush):
    fake_webpush.script = [413]
    result = webpush.send(subscription=fake_webpush.subscribe(), message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "413")


def test_the_ttl_and_topic_headers_follow_the_message(fake_webpush):
    subscription = fake_webpush.subscribe()
    webpush.send(subscription=subscription, message=MESSAGE)
    webpush.send(subscription=subscription, message=PushMessage(title="t", ttl=60))
    sent = fake_webpush.headers
    assert (sent[0]["ttl"], sent[0]["topic"]) == (str(webpush.DEFAULT_TTL_S), "order-42")
    assert sent[1]["ttl"] == "60" and "topic" not in sent[1]
    assert {h["content-encoding"] for h in sent} == {"aes128gcm"}


def test_the_vapid_key_may_be_given_as_base64url(fake_webpush, settings, vapid_key):
    raw = vapid_key.private_numbers().private_value.to_bytes(32, "big")
    settings.NOTIFYFLOW_VAPID_PRIVATE_KEY = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert webpush.send(subscription=fake_webpush.subscribe(), message=MESSAGE).accepted
    assert fake_webpush.received[0][3] == public_key_b64(vapid_key)


def test_the_vapid_header_is_signed_once_per_push_service_and_reused(fake_webpush):
    client = connections.clients.get("webpush", webpush.build)
    endpoint = fake_webpush.subscribe()["endpoint"]
    first = client.vapid_headers(endpoint, now=1_000_000)
    assert client.vapid_headers(endpoint, now=1_000_000 + 3599) is first
    assert client.vapid_headers(endpoint, now=1_000_000 + 3600) != first


@pytest.mark.parametrize(
    "subscription",
    [{}, {"endpoint": "ftp://x/y", "keys": {"p256dh": "a", "auth": "b"}}, "not json"],
)
def test_a_malformed_subscription_fails_without_a_request(fake_webpush, subscription):
    result = webpush.send(subscription=subscription, message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "invalid_subscription")
    assert fake_webpush.received == [] and fake_webpush.tls_connections == 0


def test_an_endpoint_the_allow_list_does_not_name_is_never_called(fake_webpush, settings):
    subscription = fake_webpush.subscribe()
    settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = ["fcm.googleapis.com"]
    result = webpush.send(subscription=subscription, message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "host_not_allowed")
    assert fake_webpush.headers == [] and fake_webpush.tls_connections == 0


def test_without_a_vapid_key_every_send_fails_naming_the_setting(settings):
    connections.close_all()
    settings.NOTIFYFLOW_VAPID_PRIVATE_KEY = ""
    result = webpush.send(subscription={}, message=MESSAGE)
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "not_configured")
    assert "NOTIFYFLOW_VAPID_PRIVATE_KEY" in result.detail
