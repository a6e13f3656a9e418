"""A recipient's channel data over the API: ``GET/PUT/DELETE
/api/v1/recipients/{id}/channel-data/push|chat/``, a device added (201, or 200 for a
token the recipient has) and removed by id, every bad input a 4xx in the error shape,
and the same bodies inline in a trigger, upserted with the person in one transaction."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from recipients.models import ChannelDataRemoval, ChatConnection, PushDevice
from tests.factories import (
    PAYLOAD,
    PushDeviceFactory,
    RecipientFactory,
    WorkflowFactory,
    webpush_keys,
)
from triggers.models import TriggerInstance

pytestmark = pytest.mark.django_db

PUSH = "/api/v1/recipients/{}/channel-data/push/"
CHAT = "/api/v1/recipients/{}/channel-data/chat/"
DEVICES = "/api/v1/recipients/{}/channel-data/push/devices/"
ENDPOINT = "https://fcm.googleapis.com/fcm/send/abc:def"
SUBSCRIPTION = {"endpoint": ENDPOINT, "keys": webpush_keys(7)}


@pytest.fixture(autouse=True)
def _allowed_hosts(settings):
    settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) >= {"code", "field", "message"}
    return body


def test_put_then_get_push_devices_shows_each_with_its_id_and_a_subscription_as_given(api):
    RecipientFactory(id="ada")
    body = {
        "devices": [
            {"provider": "fcm", "token": "fcm-1", "locale": "fr-FR", "timezone": "Europe/Paris"},
            {"provider": "apns", "token": "A1B2" * 16, "app": "com.example.ios"},
            {"provider": "webpush", "token": {**SUBSCRIPTION, "expirationTime": None}},
        ]
    }
    put = api.put(PUSH.format("ada"), body, format="json")
    assert put.status_code == 200, put.content
    got = api.get(PUSH.format("ada")).json()
    assert got == put.json()
    fcm, apns, web = got["devices"]
    assert (fcm["provider"], fcm["token"], fcm["locale"], fcm["timezone"], fcm["app"]) == (
        "fcm",
        "fcm-1",
        "fr-FR",
        "Europe/Paris",
        None,
    )
    assert apns["token"] == "a1b2" * 16  # stored lower-case
    assert web["token"] == SUBSCRIPTION
    assert len({fcm["id"], apns["id"], web["id"]}) == 3


def test_a_put_keeps_the_id_of_a_device_it_lists_again_and_removes_the_others(api):
    RecipientFactory(id="ada")
    first = api.put(
        PUSH.format("ada"),
        {"devices": [{"provider": "fcm", "token": "keep"}, {"provider": "fcm", "token": "drop"}]},
        format="json",
    ).json()["devices"]
    second = api.put(
        PUSH.format("ada"),
        {"devices": [{"provider": "fcm", "token": "keep", "locale": "de"}]},
        format="json",
    ).json()["devices"]
    assert [(d["id"], d["locale"]) for d in second] == [(first[0]["id"], "de")]
    removal = ChannelDataRemoval.objects.get()
    assert (removal.reason, removal.source) == ("replaced", "api:tests")
    assert removal.target == "…p"  # never the token: its end, at most a quarter of it


def test_delete_clears_a_channel_and_leaves_the_other(api):
    person = RecipientFactory(id="ada")
    PushDeviceFactory(recipient=person)
    ChatConnection.objects.create(recipient=person, provider="slack", channel="C1")
    assert api.delete(PUSH.format("ada")).status_code == 204
    assert api.get(PUSH.format("ada")).json() == {"devices": []}
    assert len(api.get(CHAT.format("ada")).json()["connections"]) == 1


def test_chat_connections_round_trip_in_each_form(api):
    RecipientFactory(id="ada")
    body = {
        "connections": [
            {"provider": "slack", "channel": "C0123"},
            {"provider": "slack", "user": "U0456"},
            {"provider": "msteams", "webhook_url": "https://hooks.example.com/teams/1"},
        ]
    }
    response = api.put(CHAT.format("ada"), body, format="json")
    assert response.status_code == 200, response.content
    shown = [
        {k: c[k] for k in ("provider", "channel", "user", "webhook_url")}
        for c in api.get(CHAT.format("ada")).json()["connections"]
    ]
    assert shown == [
        {"provider": "slack", "channel": "C0123", "user": None, "webhook_url": None},
        {"provider": "slack", "channel": None, "user": "U0456", "webhook_url": None},
        {
            "provider": "msteams",
            "channel": None,
            "user": None,
            "webhook_url": "https://hooks.example.com/teams/1",
        },
    ]


def test_adding_a_device_is_201_then_200_for_the_same_token(api):
    RecipientFactory(id="ada")
    device = {"provider": "fcm", "token": "tok-1", "locale": "en"}
    created = api.post(DEVICES.format("ada"), device, format="json")
    assert created.status_code == 201, created.content
    again = api.post(DEVICES.format("ada"), {**device, "locale": "fr"}, format="json")
    assert again.status_code == 200
    assert again.json()["id"] == created.json()["id"]
    assert again.json()["locale"] == "fr"
    assert PushDevice.objects.count() == 1


def test_the_twenty_first_device_is_a_409(api):
    person = RecipientFactory(id="ada")
    PushDeviceFactory.create_batch(20, recipient=person)
    body = _error(
        api.post(DEVICES.format("ada"), {"provider": "fcm", "token": "one-more"}, format="json"),
        409,
    )
    assert body["code"] == "too_many_devices"


def test_a_device_is_removed_by_id_and_another_recipients_device_is_a_404(api):
    ada = PushDeviceFactory(recipient=RecipientFactory(id="ada"))
    bob = PushDeviceFactory(recipient=RecipientFactory(id="bob"))
    assert api.delete(f"{DEVICES.format('ada')}{ada.pk}/").status_code == 204
    assert not PushDevice.objects.filter(pk=ada.pk).exists()
    body = _error(api.delete(f"{DEVICES.format('ada')}{bob.pk}/"), 404)
    assert body["code"] == "device_not_found"
    assert PushDevice.objects.filter(pk=bob.pk).exists()


@pytest.mark.parametrize(
    "path",
    [PUSH.format("nobody"), CHAT.format("nobody"), DEVICES.format("nobody")],
)
def test_an_unknown_recipient_is_a_404(api, path):
    if path.endswith("devices/"):
        response = api.post(path, {"provider": "fcm", "token": "t"}, format="json")
    else:
        response = api.get(path)
    assert _error(response, 404)["code"] == "not_found"


def test_a_channel_other_than_push_and_chat_is_a_404(api):
    RecipientFactory(id="ada")
    assert _error(api.get("/api/v1/recipients/ada/channel-data/email/"), 404)["code"] == (
        "not_found"
    )


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({}, "devices", "required"),
        ({"devices": {}}, "devices", "not_a_list"),
        (
            {"devices": [{"provider": "fcm", "token": f"t{n}"} for n in range(21)]},
            "devices",
            "too_many_devices",
        ),
        ({"devices": [{"provider": "gcm", "token": "t"}]}, "devices[0].provider", "invalid_choice"),
        ({"devices": [{"provider": "fcm", "token": "a b"}]}, "devices[0].token", "invalid_token"),
        (
            {"devices": [{"provider": "fcm", "token": "a\u202eb"}]},
            "devices[0].token",
            "bidi_control",
        ),
        ({"devices": [{"provider": "fcm", "token": "x" * 1025}]}, "devices[0].token", "too_long"),
        ({"devices": [{"provider": "apns", "token": "xyz"}]}, "devices[0].token", "invalid_token"),
        (
            {"devices": [{"provider": "fcm", "token": "t", "timezone": "Mars/Base"}]},
            "devices[0].timezone",
            "invalid_timezone",
        ),
        (
            {"devices": [{"provider": "fcm", "token": "t", "os": "ios"}]},
            "devices[0].os",
            "unknown_field",
        ),
        (
            {"devices": [{"provider": "webpush", "token": "https://fcm.googleapis.com/x"}]},
            "devices[0].token",
            "not_an_object",
        ),
        (
            {
                "devices": [
                    {
                        "provider": "webpush",
                        "token": {**SUBSCRIPTION, "endpoint": "https://evil.example/x"},
                    }
                ]
            },
            "devices[0].token.endpoint",
            "host_not_allowed",
        ),
        (
            {
                "devices": [
                    {
                        "provider": "webpush",
                        "token": {
                            **SUBSCRIPTION,
                            "keys": {**SUBSCRIPTION["keys"], "auth": "c2hvcnQ"},
                        },
                    }
                ]
            },
            "devices[0].token.keys.auth",
            "invalid_key",
        ),
    ],
)
def test_a_bad_push_body_is_a_400_naming_the_field(api, body, field, code):
    RecipientFactory(id="ada")
    error = _error(api.put(PUSH.format("ada"), body, format="json"), 400)
    assert (error["field"], error["code"]) == (field, code)
    assert error["message"].startswith(field)
    assert not PushDevice.objects.exists()


@pytest.mark.parametrize(
    ("connection", "field", "code"),
    [
        ({"provider": "slack"}, "connections[0]", "one_target"),
        ({"provider": "slack", "channel": "C1", "user": "U1"}, "connections[0]", "one_target"),
        ({"provider": "discord", "channel": "C1"}, "connections[0].channel", "webhook_required"),
        (
            {"provider": "slack", "webhook_url": "https://other.example/x"},
            "connections[0].webhook_url",
            "host_not_allowed",
        ),
        (
            {"provider": "slack", "webhook_url": "ftp://hooks.example.com/x"},
            "connections[0].webhook_url",
            "invalid_url",
        ),
        ({"provider": "slack", "channel": "C\n1"}, "connections[0].channel", "control_character"),
        ({"provider": "irc", "channel": "C1"}, "connections[0].provider", "invalid_choice"),
    ],
)
def test_a_bad_chat_body_is_a_400_naming_the_field(api, connection, field, code):
    RecipientFactory(id="ada")
    response = api.put(CHAT.format("ada"), {"connections": [connection]}, format="json")
    error = _error(response, 400)
    assert (error["field"], error["code"]) == (field, code)


def test_a_key_limited_to_workflows_and_a_read_key_may_not_write(api):
    RecipientFactory(id="ada")
    body = {"devices": [{"provider": "fcm", "token": "t"}]}
    for scope, workflows, method in (("admin", ("welcome",), "get"), ("read", (), "put")):
        client = APIClient()
        raw = api_key_create(name=f"k-{scope}", scope=scope, workflows=workflows)[1]
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        response = getattr(client, method)(PUSH.format("ada"), body, format="json")
        assert _error(response, 403)["code"] == "permission_denied"
    assert not PushDevice.objects.exists()


def _trigger(api, recipients: list) -> object:
    return api.post(
        "/api/v1/triggers/",
        {
            "workflow": "welcome",
            "idempotency_key": "k-1",
            "payload": PAYLOAD,
            "recipients": recipients,
        },
        format="json",
    )


def test_inline_channel_data_is_upserted_with_the_person(api, dispatched):
    WorkflowFactory(key="welcome")
    ada = RecipientFactory(id="ada")
    kept = ChatConnection.objects.create(recipient=ada, provider="slack", channel="C-kept")
    inline = {
        "id": "ada",
        "email": "ada@example.com",
        "channel_data": {
            "push": {
                "devices": [
                    {"provider": "fcm", "token": "fcm-ada"},
                    {"provider": "webpush", "token": SUBSCRIPTION},
                ]
            }
        },
    }
    response = _trigger(
        api,
        [
            inline,
            {
                "id": "bob",
                "channel_data": {
                    "chat": {
                        "connections": [
                            {
                                "provider": "discord",
                                "webhook_url": "https://hooks.example.com/discord/9",
                            }
                        ]
                    }
                },
            },
        ],
    )
    assert response.status_code == 201, response.content
    assert sorted(PushDevice.objects.filter(recipient=ada).values_list("provider", flat=True)) == [
        "fcm",
        "webpush",
    ]
    # A channel left out is kept; bob, new, got his connection.
    assert list(ChatConnection.objects.filter(recipient=ada)) == [kept]
    assert ChatConnection.objects.get(recipient_id="bob").provider == "discord"


def test_a_bad_inline_device_refuses_the_whole_trigger_naming_it(api, dispatched):
    WorkflowFactory(key="welcome")
    bad = {"id": "bob", "channel_data": {"push": {"devices": [{"provider": "apns", "token": "z"}]}}}
    good = {"id": "ada", "channel_data": {"push": {"devices": [{"provider": "fcm", "token": "t"}]}}}
    error = _error(_trigger(api, [good, bad]), 400)
    assert (error["field"], error["code"]) == (
        "recipients[1].channel_data.push.devices[0].token",
        "invalid_token",
    )
    assert not PushDevice.objects.exists()
    assert not TriggerInstance.objects.exists()


def test_bulk_recipients_carry_channel_data_and_a_bad_item_is_invalid_alone(api):
    response = api.post(
        "/api/v1/recipients/bulk/",
        {
            "items": [
                {
                    "id": "ada",
                    "channel_data": {"push": {"devices": [{"provider": "fcm", "token": "t-ada"}]}},
                },
                {"id": "bob", "channel_data": {"chat": {"connections": [{"provider": "slack"}]}}},
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    ok, bad = response.json()["results"]
    assert ok["status"] == "created"
    assert (bad["status"], bad["error"]["field"], bad["error"]["code"]) == (
        "invalid",
        "channel_data.chat.connections[0]",
        "one_target",
    )
    assert PushDevice.objects.get().recipient_id == "ada"


def test_the_schema_describes_each_device_form_and_the_inline_channel_data(api):
    schema = api.get("/api/schema/?format=json", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    forms = components["PushDeviceInput"]["oneOf"]
    assert [f["properties"]["provider"]["pattern"] for f in forms] == [
        "^fcm$",
        "^apns$",
        "^webpush$",
    ]
    assert components["InlineRecipient"]["properties"]["channel_data"] == {
        "$ref": "#/components/schemas/ChannelDataInput"
    }
    devices = schema["paths"]["/api/v1/recipients/{id}/channel-data/push/devices/"]["post"]
    assert {"200", "201", "400", "404", "409"} <= set(devices["responses"])
