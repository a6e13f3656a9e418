"""A recipient's channel data, through its services: a channel replaced keeps the ids of
what it lists again, a device added is idempotent by token and bounded, every removal
is audited, a dead token or webhook goes with a status event (never the secret in it),
inline channel data is written per channel and set-based, and the database refuses a
row of no valid form."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from notifyflow.errors import ConflictError, NotFoundError
from recipients.channel_data import (
    channel_data_secrets,
    chat_connections_get,
    chat_connections_set,
    connection_remove_dead,
    device_remove_dead,
    push_device_add,
    push_device_remove,
    push_devices_clear,
    push_devices_get,
    push_devices_set,
)
from recipients.channel_inputs import (
    MAX_DEVICES,
    ChannelData,
    ConnectionInput,
    DeviceInput,
)
from recipients.models import ChannelDataRemoval, ChatConnection, PushDevice
from recipients.services import recipients_upsert
from status_webhooks.models import WebhookMessage
from tests.factories import (
    ChatConnectionFactory,
    PushDeviceFactory,
    RecipientFactory,
    webpush_keys,
)
from tests.webhook_events import kicks, sent_to, subscribe

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]
__all__ = ["kicks"]


def fcm(token: str, **fields) -> DeviceInput:
    return DeviceInput(provider="fcm", token=token, **fields)


def test_replacing_devices_keeps_the_ids_of_those_listed_again_and_audits_the_rest():
    ada = RecipientFactory(id="ada")
    kept, dropped = push_devices_set(
        recipient_id="ada", devices=[fcm("keep"), fcm("drop-this-token")], actor="api:k"
    )
    after = push_devices_set(
        recipient_id="ada", devices=[fcm("keep", locale="de"), fcm("new")], actor="api:k"
    )
    assert [(d.pk, d.locale) for d in after[:1]] == [(kept.pk, "de")]
    assert [d.token for d in after] == ["keep", "new"]
    removal = ChannelDataRemoval.objects.get(recipient=ada)
    assert (removal.target_id, removal.reason, removal.source) == (dropped.pk, "replaced", "api:k")
    assert "drop-this-token" not in removal.target


def test_clearing_a_channel_audits_each_removal_as_deleted():
    ada = RecipientFactory(id="ada")
    PushDeviceFactory.create_batch(3, recipient=ada)
    push_devices_clear(recipient_id="ada", actor="api:k")
    assert push_devices_get(recipient_id="ada") == []
    assert list(ChannelDataRemoval.objects.values_list("reason", flat=True)) == ["deleted"] * 3


def test_adding_a_device_is_idempotent_by_provider_and_token():
    RecipientFactory(id="ada")
    first, created = push_device_add(recipient_id="ada", device=fcm("t", app="a"))
    again, created_again = push_device_add(recipient_id="ada", device=fcm("t", app="b"))
    assert (created, created_again) == (True, False)
    assert (again.pk, again.app) == (first.pk, "b")
    # The same token of another provider is another device.
    other, created = push_device_add(
        recipient_id="ada", device=DeviceInput(provider="apns", token="t")
    )
    assert created and other.pk != first.pk


def test_a_recipient_holds_at_most_twenty_devices():
    ada = RecipientFactory(id="ada")
    PushDeviceFactory.create_batch(MAX_DEVICES, recipient=ada)
    with pytest.raises(ConflictError) as refused:
        push_device_add(recipient_id="ada", device=fcm("one-more"))
    assert refused.value.code == "too_many_devices"
    # One it has already is still an update, not a 21st.
    existing = PushDevice.objects.filter(recipient=ada).first()
    assert push_device_add(recipient_id="ada", device=fcm(existing.token))[1] is False


def test_unknown_recipients_and_devices_are_not_found():
    RecipientFactory(id="ada")
    other = PushDeviceFactory()
    for call in (
        lambda: push_devices_get(recipient_id="nobody"),
        lambda: push_devices_set(recipient_id="nobody", devices=[], actor="api"),
        lambda: push_device_add(recipient_id="nobody", device=fcm("t")),
        lambda: chat_connections_get(recipient_id="nobody"),
    ):
        with pytest.raises(NotFoundError) as missing:
            call()
        assert missing.value.code == "not_found"
    with pytest.raises(NotFoundError) as missing:
        push_device_remove(recipient_id="ada", device_id=other.pk, actor="api")
    assert missing.value.code == "device_not_found"
    assert PushDevice.objects.filter(pk=other.pk).exists()


def test_a_dead_token_is_removed_with_an_audit_row_and_a_status_event(kicks):
    endpoint = subscribe("recipient.device_removed")
    device = PushDeviceFactory(recipient=RecipientFactory(id="ada"), token="fcm-dead-token-xyz")
    removed = device_remove_dead(
        device_id=device.pk,
        provider="fcm",
        reason_code="UNREGISTERED",
        details={"instance": "i-1", "node": "push"},
    )
    assert removed
    assert not PushDevice.objects.filter(pk=device.pk).exists()
    audit = ChannelDataRemoval.objects.get()
    assert (audit.channel, audit.provider, audit.reason, audit.source, audit.details) == (
        "push",
        "fcm",
        "UNREGISTERED",
        "provider",
        {"instance": "i-1", "node": "push"},
    )
    (message,) = sent_to(endpoint)
    assert message.type == "recipient.device_removed"
    assert message.data == {
        "recipient": "ada",
        "device_id": str(device.pk),
        "provider": "fcm",
        "reason": "UNREGISTERED",
        "source": "provider",
    }
    assert "fcm-dead-token-xyz" not in str(message.data) + audit.target


def test_a_device_already_gone_or_of_another_provider_is_not_removed_twice(kicks):
    subscribe("recipient.device_removed")
    device = PushDeviceFactory()
    assert not device_remove_dead(device_id=device.pk, provider="apns", reason_code="410")
    assert device_remove_dead(device_id=device.pk, provider="fcm", reason_code="UNREGISTERED")
    assert not device_remove_dead(device_id=device.pk, provider="fcm", reason_code="UNREGISTERED")
    assert ChannelDataRemoval.objects.count() == 1
    assert WebhookMessage.objects.count() == 1


def test_a_dead_webhook_connection_is_removed_and_the_others_stay(kicks):
    endpoint = subscribe("recipient.connection_removed")
    ada = RecipientFactory(id="ada")
    dead = ChatConnectionFactory(recipient=ada, webhook=True, provider="discord")
    alive = ChatConnectionFactory(recipient=ada)
    assert connection_remove_dead(connection_id=dead.pk, reason_code="404")
    assert chat_connections_get(recipient_id="ada") == [alive]
    audit = ChannelDataRemoval.objects.get()
    assert (audit.channel, audit.target, audit.reason) == ("chat", "hooks.example.com", "404")
    (message,) = sent_to(endpoint)
    assert message.data["connection_id"] == str(dead.pk)
    assert dead.webhook_url not in str(message.data)


def test_replacing_connections_keeps_each_target_once():
    RecipientFactory(id="ada")
    first = chat_connections_set(
        recipient_id="ada",
        connections=[ConnectionInput("slack", channel="C1"), ConnectionInput("slack", user="U1")],
        actor="api",
    )
    second = chat_connections_set(
        recipient_id="ada", connections=[ConnectionInput("slack", user="U1")], actor="api"
    )
    assert [c.pk for c in second] == [first[1].pk]
    assert ChannelDataRemoval.objects.get().target == "C1"


def test_inline_channel_data_replaces_the_channels_it_names_and_keeps_the_others():
    ada = RecipientFactory(id="ada")
    kept = ChatConnectionFactory(recipient=ada)
    old = PushDeviceFactory(recipient=ada)
    created = recipients_upsert(
        items=[
            {"id": "ada", "channel_data": ChannelData(push=[fcm("new")])},
            {"id": "bob", "channel_data": ChannelData(chat=[ConnectionInput("slack", user="U9")])},
        ],
        actor="api:k",
    )
    assert created == {"bob"}
    assert [d.token for d in push_devices_get(recipient_id="ada")] == ["new"]
    assert not PushDevice.objects.filter(pk=old.pk).exists()
    assert chat_connections_get(recipient_id="ada") == [kept]
    assert [c.user for c in chat_connections_get(recipient_id="bob")] == ["U9"]
    assert ChannelDataRemoval.objects.get().source == "api:k"


def test_an_empty_channel_clears_it_and_a_later_item_of_the_same_person_wins():
    ada = RecipientFactory(id="ada")
    PushDeviceFactory(recipient=ada)
    recipients_upsert(
        items=[
            {"id": "ada", "channel_data": ChannelData(push=[fcm("first")])},
            {"id": "ada", "channel_data": ChannelData(chat=[])},
            {"id": "ada", "channel_data": ChannelData(push=[])},
        ]
    )
    assert push_devices_get(recipient_id="ada") == []


def test_inline_channel_data_of_many_people_takes_a_bounded_number_of_queries(
    django_assert_max_num_queries,
):
    people = [f"p{n:03d}" for n in range(100)]
    for rid in people[:50]:
        PushDeviceFactory(recipient=RecipientFactory(id=rid), token=f"old-{rid}")
    items = [
        {"id": rid, "channel_data": ChannelData(push=[fcm(f"t-{rid}"), fcm(f"u-{rid}")])}
        for rid in people
    ]
    with django_assert_max_num_queries(20):
        recipients_upsert(items=items)
    assert PushDevice.objects.count() == 200
    assert ChannelDataRemoval.objects.count() == 50


def test_the_secrets_erasure_scrubs_are_tokens_keys_webhook_urls_and_slack_users():
    ada = RecipientFactory(id="ada")
    web = PushDeviceFactory(recipient=ada, webpush=True)
    app = PushDeviceFactory(recipient=ada)
    hook = ChatConnectionFactory(recipient=ada, webhook=True)
    ChatConnectionFactory(recipient=ada, slack_user=True, user="U42")
    ChatConnectionFactory(recipient=ada, channel="C-team")
    found = set(channel_data_secrets(recipient_id="ada"))
    assert found == {web.token, *web.keys.values(), app.token, hook.webhook_url, "U42"}


@pytest.mark.parametrize(
    "fields",
    [
        {"provider": "webpush", "token": "https://fcm.googleapis.com/x", "keys": None},
        {"provider": "fcm", "token": "t", "keys": webpush_keys()},
        {"provider": "gcm", "token": "t"},
    ],
    ids=["webpush-without-keys", "fcm-with-keys", "unknown-provider"],
)
def test_the_database_refuses_a_device_of_no_valid_form(fields):
    ada = RecipientFactory(id="ada")
    with pytest.raises(IntegrityError), transaction.atomic():
        PushDevice.objects.create(recipient=ada, **fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"provider": "slack"},
        {"provider": "slack", "channel": "C1", "user": "U1"},
        {"provider": "slack", "channel": "C1", "webhook_url": "https://h/x"},
        {"provider": "msteams", "channel": "C1"},
    ],
    ids=["no-target", "channel-and-user", "channel-and-webhook", "teams-channel"],
)
def test_the_database_refuses_a_connection_of_no_valid_form(fields):
    ada = RecipientFactory(id="ada")
    with pytest.raises(IntegrityError), transaction.atomic():
        ChatConnection.objects.create(recipient=ada, **fields)


def test_the_database_refuses_the_same_token_twice_for_one_person_not_for_two():
    device = PushDeviceFactory()
    PushDeviceFactory(token=device.token)  # another person's
    with pytest.raises(IntegrityError), transaction.atomic():
        PushDeviceFactory(recipient=device.recipient, token=device.token)
