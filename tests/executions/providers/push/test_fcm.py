"""The FCM HTTP v1 client (google-auth for the OAuth token, the kept-alive HTTP/1.1
client) against a local FCM fake: its token endpoint (the service account's ``token_uri``, the JWT
assertion checked) and ``messages:send`` answering FCM's real error bodies."""

from __future__ import annotations

import pytest

from executions.providers import connections
from executions.providers.push import fcm, send_push
from executions.providers.push.message import PushMessage
from executions.providers.targets import TargetOutcome

TOKEN = "fGx1-registration-token:APA91bH"
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


def fcm_send(token: str = TOKEN, message: PushMessage = MESSAGE):
    return fcm.send(token=token, message=message)


def test_a_push_is_accepted_with_the_v1_message_and_fcms_name(fake_fcm):
    result = send_push(provider="fcm", token=TOKEN, message=MESSAGE)
    assert result.outcome == TargetOutcome.ACCEPTED and result.provider == "fcm"
    assert result.provider_message_id.startswith("projects/notifyflow-test/messages/0:")
    ((token, message),) = fake_fcm.received
    assert token == TOKEN
    assert message == {
        "token": TOKEN,
        "notification": {"title": "Your order shipped", "body": "It arrives Tuesday"},
        # FCM's data is strings only: other values as JSON.
        "data": {"order": "42", "kind": "shipping", "url": "https://shop.example.com/o/42"},
        "android": {
            "ttl": "3600s",
            "collapse_key": "order-42",
            "notification": {"sound": "default"},
        },
        "apns": {"payload": {"aps": {"badge": 3, "sound": "default"}}},
    }


def test_the_access_token_comes_from_the_token_uri_with_a_signed_assertion(fake_fcm):
    assert fcm_send().accepted
    (claims,) = fake_fcm.assertions  # RS256-verified with the service account's key
    assert claims["iss"] == fake_fcm.client_email
    assert claims["aud"] == "https://oauth2.googleapis.com/token"  # what Google checks
    assert claims["scope"] == "https://www.googleapis.com/auth/firebase.messaging"


def test_the_access_token_is_cached_and_one_connection_carries_every_send(fake_fcm):
    before = connections.connections_opened("fcm")
    results = [fcm_send(token=f"token-{n}") for n in range(20)]
    assert all(result.accepted for result in results)
    assert len(fake_fcm.tokens_issued) == 1
    assert fake_fcm.tls_connections == 1
    assert connections.connections_opened("fcm") - before == 1


def test_a_token_about_to_expire_is_fetched_again_before_a_send(fake_fcm):
    fake_fcm.expires_in = 120  # inside google-auth's refresh margin: stale at once
    assert fcm_send().accepted and fcm_send().accepted
    assert len(fake_fcm.tokens_issued) == 2


def test_a_refused_access_token_is_retried_with_a_new_one(fake_fcm):
    assert fcm_send().accepted
    fake_fcm.tokens_issued.clear()  # revoked at FCM's end
    result = fcm_send()
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "UNAUTHENTICATED")
    assert fcm_send().accepted


@pytest.mark.parametrize("error", ["UNREGISTERED", "INVALID_TOKEN"])
def test_a_dead_token_is_dead_by_fcms_error_code(fake_fcm, error):
    fake_fcm.script = [error]
    result = fcm_send()
    assert result.outcome == TargetOutcome.DEAD
    assert (
        result.code == {"UNREGISTERED": "UNREGISTERED", "INVALID_TOKEN": "INVALID_ARGUMENT"}[error]
    )


@pytest.mark.parametrize("error", ["INVALID_PAYLOAD", "SENDER_ID_MISMATCH"])
def test_an_invalid_argument_about_the_payload_fails_and_keeps_the_token(fake_fcm, error):
    fake_fcm.script = [error]
    result = fcm_send()
    assert result.outcome == TargetOutcome.FAILED
    assert result.code in ("INVALID_ARGUMENT", "SENDER_ID_MISMATCH")


def test_the_quota_is_retried_after_what_fcm_said(fake_fcm):
    fake_fcm.script = [("QUOTA_EXCEEDED", {"Retry-After": "30"})]
    result = fcm_send()
    assert (result.outcome, result.code, result.retry_after_s) == (
        TargetOutcome.RETRY,
        "QUOTA_EXCEEDED",
        30.0,
    )


@pytest.mark.parametrize("error", ["UNAVAILABLE", "INTERNAL"])
def test_a_server_error_is_transient(fake_fcm, error):
    fake_fcm.script = [(error, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})]
    result = fcm_send()
    # A date in the past: retry now.
    assert (result.outcome, result.code, result.retry_after_s) == (TargetOutcome.RETRY, error, 0.0)


def test_credentials_the_token_endpoint_refuses_fail_every_send(fake_fcm):
    fake_fcm.token_script = [400]
    result = fcm_send()
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "token_refused")
    assert fake_fcm.received == []


def test_an_unreachable_fcm_is_transient(fake_fcm, settings):
    settings.NOTIFYFLOW_FCM_URL = "https://127.0.0.1:9"
    result = fcm_send()
    assert (result.outcome, result.code) == (TargetOutcome.RETRY, "connection_error")


def test_unreadable_credentials_fail_naming_the_setting(settings, tmp_path):
    connections.close_all()
    settings.NOTIFYFLOW_FCM_CREDENTIALS = str(tmp_path / "missing.json")
    result = fcm_send()
    assert (result.outcome, result.code) == (TargetOutcome.FAILED, "not_configured")
    assert "NOTIFYFLOW_FCM_CREDENTIALS" in result.detail
