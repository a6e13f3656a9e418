"""The APNs client (httpx over HTTP/2, ES256 provider tokens) against a local APNs fake
speaking HTTP/2 over TLS with a test CA: success, dead tokens, rate limits, transient
failures, the provider token's lifetime, and one kept-alive connection."""

from __future__ import annotations

import threading
import time

import pytest

from executions.providers import connections
from executions.providers.push import apns as apns_client
from executions.providers.push import send_push
from executions.providers.push.message import PushMessage
from executions.providers.targets import TargetOutcome

TOKEN = "a1" * 32
MESSAGE = PushMessage(
    title="Your order shipped",
    body="It arrives Tuesday",
    url="https://shop.example.com/o/42",
    data={"order": 42, "kind": "shipping"},
    badge=3,
    sound="default",
    ttl=3600,
    collapse_key="order-42",
)


def test_a_push_is_accepted_with_apple_headers_payload_and_apns_id(fake_apns):
    result = send_push(provider="apns", token=TOKEN, message=MESSAGE)
    assert result.outcome == TargetOutcome.ACCEPTED and result.provider == "apns"
    assert len(result.provider_message_id) == 36  # the apns-id APNs answered
    ((token, headers, payload),) = fake_apns.received
    assert token == TOKEN
    assert headers["apns-topic"] == "com.example.app"
    assert (headers["apns-push-type"], headers["apns-priority"]) == ("alert", "10")
    assert headers["apns-collapse-id"] == "order-42"
    assert 3590 <= int(headers["apns-expiration"]) - time.time() <= 3600
    assert payload == {
        "aps": {
            "alert": {"title": "Your order shipped", "body": "It arrives Tuesday"},
            "badge": 3,
            "sound": "default",
        },
        "order": 42,
        "kind": "shipping",
        "url": "https://shop.example.com/o/42",
    }


def test_a_data_only_push_is_a_background_push_at_low_priority(fake_apns):
    result = apns_send(PushMessage(data={"sync": True}))
    assert result.accepted
    ((_, headers, payload),) = fake_apns.received
    assert (headers["apns-push-type"], headers["apns-priority"]) == ("background", "5")
    assert "apns-expiration" not in headers and "apns-collapse-id" not in headers
    assert payload == {"sync": True, "aps": {"content-available": 1}}


def apns_send(message: PushMessage = MESSAGE, token: str = TOKEN):
    return apns_client.send(token=token, message=message)


@pytest.mark.parametrize(
    "answer", [(410, "Unregistered"), (400, "BadDeviceToken"), (410, "ExpiredToken")]
)
def test_a_dead_token_is_dead_by_apples_reason(fake_apns, answer):
    fake_apns.script = [answer]
    result = apns_send()
    assert (result.outcome, result.code) == (TargetOutcome.DEAD, answer[1])


@pytest.mark.parametrize(
    "answer",
    [(400, "DeviceTokenNotForTopic"), (413, "PayloadTooLarge"), (403, "InvalidProviderToken")],
)
def test_other_refusals_fail_and_keep_the_token(fake_apns, answer):
    fake_apns.script = [answer]
    result = apns_send()
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, answer[1])


def test_too_many_requests_is_retried_after_what_apns_said(fake_apns):
    fake_apns.script = [(429, "TooManyRequests", {"Retry-After": "120"})]
    result = apns_send()
    assert (result.outcome, result.code, result.retry_after_s) == (
        TargetOutcome.RETRY,
        "TooManyRequests",
        120.0,
    )


@pytest.mark.parametrize("answer", [(503, "ServiceUnavailable"), (500, "InternalServerError")])
def test_a_server_error_is_transient(fake_apns, answer):
    fake_apns.script = [answer]
    result = apns_send()
    assert (result.outcome, result.code, result.retry_after_s) == (
        TargetOutcome.RETRY,
        answer[1],
        None,
    )
    assert apns_send().accepted  # the same connection carries on


def test_many_pushes_share_one_tls_connection(fake_apns):
    before = connections.connections_opened("apns")
    results = [apns_send(token=f"{n:064x}") for n in range(25)]
    assert fake_apns.tls_connections == 1
    assert connections.connections_opened("apns") - before == 1
    # Threads of one process (a step's sends to several devices) each take a connection
    # of their own: never more than there are requests in flight.
    threads = [threading.Thread(target=lambda: results.append(apns_send())) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.outcome for r in results] == [TargetOutcome.ACCEPTED] * 35
    assert len(fake_apns.received) == 35
    assert fake_apns.tls_connections <= 10
    assert len(fake_apns.provider_tokens) == 1  # one provider token for all of them


def test_the_provider_token_is_signed_again_after_fifty_minutes(fake_apns):
    client = connections.clients.get("apns", apns_client.build)
    first = client.provider_token(now=1_000_000)
    assert client.provider_token(now=1_000_000 + 49 * 60) == first
    assert client.provider_token(now=1_000_000 + 50 * 60) != first


def test_an_expired_provider_token_is_retried_with_a_new_one(fake_apns):
    assert apns_send().accepted
    fake_apns.expired_tokens.add(fake_apns.provider_tokens[0])
    result = apns_send()
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "ExpiredProviderToken")
    assert apns_send().accepted
    assert len(fake_apns.provider_tokens) == 2


def test_a_token_older_than_its_lifetime_is_replaced_before_apple_refuses_it(fake_apns):
    client = connections.clients.get("apns", apns_client.build)
    client.provider_token(now=time.time() - 3700)
    assert apns_send().accepted
    assert len(fake_apns.provider_tokens) == 1  # the fresh one: the old was never sent


def test_an_untrusted_certificate_is_a_connection_error_not_a_send(
    fake_apns, monkeypatch, tmp_path
):
    from tests.fake_tls import make_local_ca

    other = make_local_ca(tmp_path / "other-ca")
    monkeypatch.setenv("SSL_CERT_FILE", str(other.ca_file))
    connections.close_all()
    result = apns_send()
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "connection_error")
    assert "CERTIFICATE_VERIFY_FAILED" in result.detail
    assert fake_apns.received == []


def test_a_token_that_is_not_hex_is_never_put_in_a_path(fake_apns):
    result = apns_send(token="../../3/device/other")
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "invalid_token")
    assert fake_apns.received == []


def test_missing_settings_fail_every_send_naming_them(settings):
    connections.close_all()
    settings.NOTIFYFLOW_APNS_KEY_FILE = ""
    result = apns_send()
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "not_configured")
    assert "NOTIFYFLOW_APNS_KEY_FILE" in result.detail


def test_the_server_is_apples_production_or_sandbox_unless_set(settings):
    settings.NOTIFYFLOW_APNS_URL = ""
    assert apns_client.apns_url() == "https://api.push.apple.com"
    settings.NOTIFYFLOW_APNS_SANDBOX = True
    assert apns_client.apns_url() == "https://api.sandbox.push.apple.com"
    settings.NOTIFYFLOW_APNS_URL = "https://127.0.0.1:8443/"
    assert apns_client.apns_url() == "https://127.0.0.1:8443"
