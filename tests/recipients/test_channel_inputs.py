"""What channel data may be: each device form and its token, a Web Push subscription's
endpoint (its host on NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS, https unless loopback) and keys
(base64url of 65 and 16 bytes), chat connections in exactly one form with webhook URLs
on the webhook allow-list; every refusal names the field with a stable code."""

from __future__ import annotations

import base64

import pytest

from notifyflow.errors import ApplicationError
from recipients.channel_inputs import (
    ChannelData,
    ConnectionInput,
    DeviceInput,
    chat_webhook_problem,
    check_channel_data,
    check_chat,
    check_device,
    check_push,
    webpush_endpoint_problem,
)
from tests.factories import webpush_keys

KEYS = webpush_keys(3)


def b64(data: bytes, *, padded: bool = False) -> str:
    text = base64.urlsafe_b64encode(data).decode()
    return text if padded else text.rstrip("=")


def refusal(check, value) -> tuple[str | None, str]:
    with pytest.raises(ApplicationError) as refused:
        check(value)
    assert refused.value.message.startswith(refused.value.field or "")
    return refused.value.field, refused.value.code


def test_each_device_form_is_read_into_its_input():
    assert check_device({"provider": "fcm", "token": "abc:DEF-1_2"}) == DeviceInput(
        "fcm", "abc:DEF-1_2"
    )
    assert check_device({"provider": "apns", "token": "AB" * 32, "locale": "fr"}) == DeviceInput(
        "apns", "ab" * 32, locale="fr"
    )
    web = check_device(
        {
            "provider": "webpush",
            "token": {
                "endpoint": "https://updates.push.services.mozilla.com/wpush/v2/x",
                "keys": KEYS,
                "expirationTime": None,
            },
            "timezone": "America/New_York",
            "app": "web",
        }
    )
    assert web == DeviceInput(
        "webpush",
        "https://updates.push.services.mozilla.com/wpush/v2/x",
        keys=KEYS,
        timezone="America/New_York",
        app="web",
    )


@pytest.mark.parametrize(
    ("keys", "field", "code"),
    [
        (
            {"p256dh": b64(b"\x04" + b"\x01" * 63), "auth": b64(b"a" * 16)},
            "token.keys.p256dh",
            "invalid_key",
        ),
        (
            {"p256dh": b64(b"\x02" + b"\x01" * 64), "auth": b64(b"a" * 16)},
            "token.keys.p256dh",
            "invalid_key",
        ),
        (
            {"p256dh": b64(b"\x04" + b"\x01" * 64), "auth": b64(b"a" * 15)},
            "token.keys.auth",
            "invalid_key",
        ),
        (
            {"p256dh": b64(b"\x04" + b"\x01" * 64) + "\n", "auth": b64(b"a" * 16)},
            "token.keys.p256dh",
            "invalid_key",
        ),
        ({"p256dh": b64(b"\x04" + b"\x01" * 64)}, "token.keys.auth", "required"),
        ({**KEYS, "extra": "x"}, "token.keys.extra", "unknown_field"),
    ],
    ids=["short-point", "compressed-point", "short-secret", "trailing-newline", "no-auth", "extra"],
)
def test_web_push_keys_are_base64url_of_the_right_lengths(keys, field, code):
    device = {
        "provider": "webpush",
        "token": {"endpoint": "https://fcm.googleapis.com/fcm/send/x", "keys": keys},
    }
    assert refusal(check_device, device) == (field, code)


def test_padded_web_push_keys_are_accepted():
    keys = {"p256dh": b64(b"\x04" + b"\x07" * 64, padded=True), "auth": b64(b"s" * 16, padded=True)}
    device = {
        "provider": "webpush",
        "token": {"endpoint": "https://web.push.apple.com/Q", "keys": keys},
    }
    assert check_device(device).keys == keys


@pytest.mark.parametrize(
    ("endpoint", "problem"),
    [
        ("https://fcm.googleapis.com/fcm/send/x", None),
        ("https://wns2-par02p.notify.windows.com/w/?token=x", None),
        ("https://web.push.apple.com/QGx", None),
        ("https://fcm.googleapis.com:8443/x", "host_not_allowed"),
        ("https://evil.example/x", "host_not_allowed"),
        ("http://fcm.googleapis.com/x", "insecure_url"),
        ("https://user@fcm.googleapis.com/x", "invalid_url"),
        ("https://fcm.googleapis.com/a b", "invalid_url"),
        ("javascript:alert(1)", "invalid_url"),
    ],
)
def test_a_web_push_endpoint_must_be_https_on_the_allow_list(endpoint, problem):
    found = webpush_endpoint_problem(endpoint)
    assert (found and found[0]) == problem


def test_plain_http_reaches_only_a_loopback_host_listed(settings):
    settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = ["127.0.0.1:8099", "push.internal:8099"]
    assert webpush_endpoint_problem("http://127.0.0.1:8099/push/1") is None
    assert webpush_endpoint_problem("http://push.internal:8099/push/1")[0] == "insecure_url"
    assert webpush_endpoint_problem("https://push.internal:8099/push/1") is None
    assert webpush_endpoint_problem("http://127.0.0.1:6379/")[0] == "host_not_allowed"


def test_an_empty_web_push_allow_list_allows_no_endpoint(settings):
    settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = []
    assert webpush_endpoint_problem("https://fcm.googleapis.com/x")[0] == "host_not_allowed"


def test_chat_webhooks_obey_the_webhook_allow_list(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.slack.com", "*.webhook.office.com"]
    assert chat_webhook_problem("https://hooks.slack.com/services/T/B/x") is None
    assert chat_webhook_problem("https://acme.webhook.office.com/webhookb2/x") is None
    assert chat_webhook_problem("https://discord.com/api/webhooks/1/x")[0] == "host_not_allowed"
    assert chat_webhook_problem("https://hooks.slack.com:444/x")[0] == "host_not_allowed"


@pytest.mark.parametrize(
    ("device", "field", "code"),
    [
        ("fcm", "body", "not_an_object"),
        ({"token": "t"}, "provider", "required"),
        ({"provider": "FCM", "token": "t"}, "provider", "invalid_choice"),
        ({"provider": "fcm"}, "token", "required"),
        ({"provider": "fcm", "token": 12}, "token", "required"),
        ({"provider": "fcm", "token": "t\x00"}, "token", "nul_character"),
        ({"provider": "fcm", "token": "jeton-é"}, "token", "invalid_token"),
        ({"provider": "apns", "token": "abc"}, "token", "invalid_token"),
        ({"provider": "apns", "token": "ab" * 101}, "token", "too_long"),
        ({"provider": "fcm", "token": "t", "locale": ""}, "locale", "invalid"),
        ({"provider": "fcm", "token": "t", "locale": "x" * 36}, "locale", "too_long"),
        ({"provider": "fcm", "token": "t", "app": "a\u2066b"}, "app", "bidi_control"),
        ({"provider": "fcm", "token": "t", "timezone": "CET "}, "timezone", "invalid_timezone"),
    ],
)
def test_a_bad_device_is_refused_naming_its_field(device, field, code):
    assert refusal(check_device, device) == (field, code)


def test_a_push_body_keeps_one_device_per_token_the_last_given():
    devices = check_push(
        {
            "devices": [
                {"provider": "fcm", "token": "a", "locale": "en"},
                {"provider": "fcm", "token": "b"},
                {"provider": "fcm", "token": "a", "locale": "fr"},
            ]
        }
    )
    assert [(d.token, d.locale) for d in devices] == [("a", "fr"), ("b", None)]


def test_twenty_devices_at_most():
    many = {"devices": [{"provider": "fcm", "token": f"t{n}"} for n in range(21)]}
    assert refusal(check_push, many) == ("devices", "too_many_devices")
    assert len(check_push({"devices": many["devices"][:20]})) == 20


@pytest.mark.parametrize(
    ("connection", "expected"),
    [
        ({"provider": "slack", "channel": "C0123"}, ConnectionInput("slack", channel="C0123")),
        ({"provider": "slack", "user": "U0123"}, ConnectionInput("slack", user="U0123")),
        (
            {"provider": "discord", "webhook_url": "https://hooks.example.com/d"},
            ConnectionInput("discord", webhook_url="https://hooks.example.com/d"),
        ),
    ],
)
def test_each_connection_form_is_read(settings, connection, expected):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    assert check_chat({"connections": [connection, connection]}) == [expected]


@pytest.mark.parametrize(
    ("connection", "field", "code"),
    [
        ({"provider": "slack"}, "connections[0]", "one_target"),
        (
            {"provider": "slack", "channel": "C", "webhook_url": "https://x/y"},
            "connections[0]",
            "one_target",
        ),
        ({"provider": "msteams", "user": "U1"}, "connections[0].user", "webhook_required"),
        ({"provider": "slack", "channel": ""}, "connections[0].channel", "required"),
        ({"provider": "slack", "channel": None}, "connections[0].channel", "required"),
        (
            {"provider": "slack", "webhook_url": "https://x.example/y"},
            "connections[0].webhook_url",
            "host_not_allowed",
        ),
        (
            {"provider": "slack", "webhook_url": "https://hooks.example.com/" + "x" * 1024},
            "connections[0].webhook_url",
            "too_long",
        ),
    ],
)
def test_a_bad_connection_is_refused_naming_its_field(settings, connection, field, code):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    assert refusal(check_chat, {"connections": [connection]}) == (field, code)


def test_inline_channel_data_names_what_it_replaces_and_clears_on_null():
    assert check_channel_data({}) == ChannelData()
    assert check_channel_data({"push": None}) == ChannelData(push=[])
    assert check_channel_data({"chat": {"connections": []}}) == ChannelData(chat=[])
    assert refusal(check_channel_data, {"email": {}}) == ("channel_data.email", "unknown_field")
    assert refusal(
        check_channel_data, {"push": {"devices": [{"provider": "x", "token": "t"}]}}
    ) == (
        "channel_data.push.devices[0].provider",
        "invalid_choice",
    )
