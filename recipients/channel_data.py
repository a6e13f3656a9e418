"""A recipient's channel data: push devices and chat connections (docs/api.md#channel-data).

Writes take the inputs ``recipients.channel_inputs`` checked: ``GET``/``PUT``/``DELETE``
of a channel's whole data, a device added (idempotent by provider and token) or removed
by id, the channel data of inline recipients (``recipients_upsert``: one set-based pass
for a trigger's people), and the removals a send makes when a provider says a token or
a webhook is dead (``device_remove_dead``, ``connection_remove_dead``).

Every removal is an audit row (``ChannelDataRemoval``: what it was, shortened; why; who).
One the API caller did not ask for - a dead token or webhook, an administrator's
deletion in the console - is also a status event (``recipient.device_removed``,
``recipient.connection_removed``), in the same transaction.

Each write locks its recipients' rows first (``FOR NO KEY UPDATE``, in id order), then
their devices or connections: concurrent writes of one person's channel data serialize,
in one lock order, and never block the inserts that only reference the person (an
instance, an audit row).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from notifyflow.errors import ConflictError, NotFoundError
from status_webhooks import events as status_events
from status_webhooks.outbox import NewEvent, record

from .channel_inputs import MAX_DEVICES, ChannelData, ConnectionInput, DeviceInput
from .models import (
    ChannelDataKind,
    ChannelDataRemoval,
    ChatConnection,
    PushDevice,
    Recipient,
)

# ``source`` of a removal a send made (a provider said the token or webhook is dead).
PROVIDER_SOURCE = "provider"
# ``reason`` of removals someone asked for.
DELETED, REPLACED = "deleted", "replaced"
_DEVICE_FIELDS = ("keys", "locale", "timezone", "app")


def _lock(recipient_ids: Iterable[str]) -> set[str]:
    """Lock the recipients' rows (those that exist) for this transaction; their ids."""
    ids = sorted(set(recipient_ids))
    rows = Recipient.objects.select_for_update(no_key=True).filter(pk__in=ids).order_by("pk")
    return set(rows.values_list("pk", flat=True))


def _lock_one(recipient_id: str) -> None:
    if not _lock([recipient_id]):
        raise NotFoundError(
            code="not_found", field=None, message=f"no recipient with id {recipient_id!r}"
        )


def _exists(recipient_id: str) -> None:
    if not Recipient.objects.filter(pk=recipient_id).exists():
        raise NotFoundError(
            code="not_found", field=None, message=f"no recipient with id {recipient_id!r}"
        )


# --- what is shown of a removed target (the audit names it, never the secret) ---------
def _device_target(device: PushDevice) -> str:
    return device.short_token


def _connection_target(connection: ChatConnection) -> str:
    return connection.webhook_host or connection.channel or connection.user or "?"


def _removals(
    rows: Sequence[PushDevice | ChatConnection], *, reason: str, source: str, details: Any = None
) -> list[ChannelDataRemoval]:
    return [
        ChannelDataRemoval(
            recipient_id=row.recipient_id,
            channel=ChannelDataKind.PUSH if isinstance(row, PushDevice) else ChannelDataKind.CHAT,
            target_id=row.pk,
            provider=row.provider,
            target=(
                _device_target(row) if isinstance(row, PushDevice) else _connection_target(row)
            )[:200],
            reason=reason[:100],
            source=source[:120],
            details=dict(details or {}),
        )
        for row in rows
    ]


def _removal_event(row: PushDevice | ChatConnection, *, reason: str, source: str) -> NewEvent:
    if isinstance(row, PushDevice):
        return status_events.recipient_device_removed(
            recipient_id=row.recipient_id,
            device_id=row.pk,
            provider=row.provider,
            reason=reason,
            source=source,
        )
    return status_events.recipient_connection_removed(
        recipient_id=row.recipient_id,
        connection_id=row.pk,
        provider=row.provider,
        reason=reason,
        source=source,
    )


def _remove(
    rows: Sequence[PushDevice | ChatConnection],
    *,
    reason: str,
    source: str,
    announce: bool = False,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Delete ``rows`` (all of one model) with an audit row each, and a status event
    each when ``announce``."""
    if not rows:
        return
    type(rows[0])._default_manager.filter(pk__in=[row.pk for row in rows]).delete()
    ChannelDataRemoval.objects.bulk_create(
        _removals(rows, reason=reason, source=source, details=details)
    )
    if announce:
        record(events=[_removal_event(row, reason=reason, source=source) for row in rows])


# --- push devices -----------------------------------------------------------------------
def push_devices_get(*, recipient_id: str) -> list[PushDevice]:
    """The recipient's devices, oldest first. NotFoundError for an unknown recipient."""
    _exists(recipient_id)
    return list(PushDevice.objects.filter(recipient_id=recipient_id).order_by("created_at", "id"))


def _device_values(device: DeviceInput) -> dict[str, Any]:
    return {name: getattr(device, name) for name in _DEVICE_FIELDS}


def _replace_devices(
    wanted: Mapping[str, Sequence[DeviceInput]], *, reason: str, source: str
) -> None:
    """Make each recipient's devices exactly ``wanted[id]`` (locked by the caller): the
    ones with the same provider and token keep their id (their locale, time zone, app
    and keys updated), the others are added or removed. A constant number of queries
    whatever the number of recipients."""
    existing = {
        (row.recipient_id, row.provider, row.token): row
        for row in PushDevice.objects.filter(recipient_id__in=list(wanted))
    }
    now = timezone.now()
    new: list[PushDevice] = []
    changed: list[PushDevice] = []
    for recipient_id, devices in wanted.items():
        for device in devices:
            row = existing.pop((recipient_id, *device.key), None)
            values = _device_values(device)
            if row is None:
                new.append(PushDevice(recipient_id=recipient_id, **asdict(device)))
            elif any(getattr(row, name) != value for name, value in values.items()):
                for name, value in values.items():
                    setattr(row, name, value)
                row.updated_at = now
                changed.append(row)
    _remove(list(existing.values()), reason=reason, source=source)
    PushDevice.objects.bulk_update(changed, [*_DEVICE_FIELDS, "updated_at"])
    PushDevice.objects.bulk_create(new)


def push_devices_set(
    *, recipient_id: str, devices: Sequence[DeviceInput], actor: str
) -> list[PushDevice]:
    """``PUT …/channel-data/push/``: the recipient's devices become ``devices`` (at most
    MAX_DEVICES, one per provider and token: ``channel_inputs.check_push``). A device
    already there keeps its id; each one dropped is an audit row (reason ``replaced``,
    source ``actor``). NotFoundError for an unknown recipient."""
    with transaction.atomic():
        _lock_one(recipient_id)
        _replace_devices({recipient_id: devices}, reason=REPLACED, source=actor)
    return push_devices_get(recipient_id=recipient_id)


def push_devices_clear(*, recipient_id: str, actor: str) -> None:
    """``DELETE …/channel-data/push/``: every device goes (an audit row each, reason
    ``deleted``). NotFoundError for an unknown recipient."""
    with transaction.atomic():
        _lock_one(recipient_id)
        _replace_devices({recipient_id: []}, reason=DELETED, source=actor)


def push_device_add(*, recipient_id: str, device: DeviceInput) -> tuple[PushDevice, bool]:
    """``POST …/channel-data/push/devices/``: add ``device``, or - when the recipient has
    a device with its provider and token - update that one's locale, time zone, app and
    keys. Returns (the device, created). NotFoundError for an unknown recipient;
    ConflictError ``too_many_devices`` when it has MAX_DEVICES already."""
    with transaction.atomic():
        _lock_one(recipient_id)
        devices = PushDevice.objects.filter(recipient_id=recipient_id)
        row = devices.filter(provider=device.provider, token=device.token).first()
        if row is not None:
            values = _device_values(device)
            if any(getattr(row, name) != value for name, value in values.items()):
                for name, value in values.items():
                    setattr(row, name, value)
                row.save(update_fields=[*_DEVICE_FIELDS, "updated_at"])
            return row, False
        if devices.count() >= MAX_DEVICES:
            raise ConflictError(
                code="too_many_devices",
                field="token",
                message=f"token: the recipient has {MAX_DEVICES} devices, the most it may "
                "have; remove one first",
            )
        return PushDevice.objects.create(recipient_id=recipient_id, **asdict(device)), True


def push_device_remove(
    *, recipient_id: str, device_id: uuid.UUID, actor: str, announce: bool = False
) -> None:
    """``DELETE …/push/devices/{id}/`` (or an administrator in the console, who passes
    ``announce``: a status event too): remove the device, with its audit row (reason
    ``deleted``, source ``actor``). NotFoundError ``device_not_found`` unless the
    recipient has that device."""
    with transaction.atomic():
        _lock_one(recipient_id)
        row = PushDevice.objects.filter(recipient_id=recipient_id, pk=device_id).first()
        if row is None:
            raise NotFoundError(
                code="device_not_found",
                field="device_id",
                message=f"device_id: recipient {recipient_id!r} has no device {device_id}",
            )
        _remove([row], reason=DELETED, source=actor, announce=announce)


def device_remove_dead(
    *,
    device_id: uuid.UUID | str,
    provider: str,
    reason_code: str,
    details: Mapping[str, Any] | None = None,
) -> bool:
    """A send found the device's token dead (by the provider's error code, never its
    message: ``reason_code``, e.g. ``UNREGISTERED``, ``BadDeviceToken``, ``410``):
    delete it, with an audit row (source ``provider``, ``details``: where, e.g. the
    instance and node) and a ``recipient.device_removed`` status event, in one
    transaction. False when there is no such device of ``provider`` any more (removed
    or replaced meanwhile, or the recipient erased): nothing is written."""
    return _remove_dead(PushDevice, device_id, provider, reason_code, details)


def _remove_dead(
    model: type[PushDevice] | type[ChatConnection],
    target_id: uuid.UUID | str,
    provider: str | None,
    reason_code: str,
    details: Mapping[str, Any] | None,
) -> bool:
    rows = model._default_manager.filter(pk=target_id)
    if provider is not None:
        rows = rows.filter(provider=provider)
    with transaction.atomic():
        # Its recipient first, as every write locks them: then the row itself.
        recipient_id = rows.values_list("recipient_id", flat=True).first()
        if recipient_id is None or not _lock([recipient_id]):
            return False
        row = rows.first()
        if row is None:
            return False
        _remove([row], reason=reason_code, source=PROVIDER_SOURCE, announce=True, details=details)
    return True


# --- chat connections --------------------------------------------------------------------
def chat_connections_get(*, recipient_id: str) -> list[ChatConnection]:
    """The recipient's chat connections, oldest first. NotFoundError for an unknown
    recipient."""
    _exists(recipient_id)
    rows = ChatConnection.objects.filter(recipient_id=recipient_id)
    return list(rows.order_by("created_at", "id"))


def _connection_key(row: ChatConnection) -> tuple[str, str, str]:
    if row.webhook_url is not None:
        return row.recipient_id, "webhook_url", row.webhook_url
    if row.channel is not None:
        return row.recipient_id, "channel", row.channel
    return row.recipient_id, "user", row.user or ""


def _replace_connections(
    wanted: Mapping[str, Sequence[ConnectionInput]], *, reason: str, source: str
) -> None:
    """As ``_replace_devices``: one per target, which keeps its id (its provider
    updated)."""
    existing = {
        _connection_key(row): row
        for row in ChatConnection.objects.filter(recipient_id__in=list(wanted))
    }
    now = timezone.now()
    new: list[ChatConnection] = []
    changed: list[ChatConnection] = []
    for recipient_id, connections in wanted.items():
        for connection in connections:
            row = existing.pop((recipient_id, *connection.key), None)
            if row is None:
                new.append(ChatConnection(recipient_id=recipient_id, **asdict(connection)))
            elif row.provider != connection.provider:
                row.provider, row.updated_at = connection.provider, now
                changed.append(row)
    _remove(list(existing.values()), reason=reason, source=source)
    ChatConnection.objects.bulk_update(changed, ["provider", "updated_at"])
    ChatConnection.objects.bulk_create(new)


def chat_connections_set(
    *, recipient_id: str, connections: Sequence[ConnectionInput], actor: str
) -> list[ChatConnection]:
    """``PUT …/channel-data/chat/``: the recipient's connections become ``connections``
    (``channel_inputs.check_chat``), as ``push_devices_set`` does for devices."""
    with transaction.atomic():
        _lock_one(recipient_id)
        _replace_connections({recipient_id: connections}, reason=REPLACED, source=actor)
    return chat_connections_get(recipient_id=recipient_id)


def chat_connections_clear(*, recipient_id: str, actor: str) -> None:
    """``DELETE …/channel-data/chat/``: every connection goes (an audit row each, reason
    ``deleted``). NotFoundError for an unknown recipient."""
    with transaction.atomic():
        _lock_one(recipient_id)
        _replace_connections({recipient_id: []}, reason=DELETED, source=actor)


def chat_connection_remove(
    *, recipient_id: str, connection_id: uuid.UUID, actor: str, announce: bool = False
) -> None:
    """Remove one connection (an administrator in the console, ``announce``: with a
    status event), audited. NotFoundError ``connection_not_found``."""
    with transaction.atomic():
        _lock_one(recipient_id)
        row = ChatConnection.objects.filter(recipient_id=recipient_id, pk=connection_id).first()
        if row is None:
            raise NotFoundError(
                code="connection_not_found",
                field="connection_id",
                message=f"connection_id: recipient {recipient_id!r} has no connection "
                f"{connection_id}",
            )
        _remove([row], reason=DELETED, source=actor, announce=announce)


def connection_remove_dead(
    *,
    connection_id: uuid.UUID | str,
    reason_code: str,
    details: Mapping[str, Any] | None = None,
) -> bool:
    """A chat connection's incoming webhook answered that it is gone (404 or 410:
    ``reason_code``): delete it with an audit row and a ``recipient.connection_removed``
    status event, as ``device_remove_dead`` does. False when it is gone already."""
    return _remove_dead(ChatConnection, connection_id, None, reason_code, details)


# --- inline recipients, erasure -----------------------------------------------------------
def channel_data_write(*, items: Mapping[str, ChannelData], actor: str) -> None:
    """The channel data of inline recipients (a trigger's, a bulk upsert's), in the
    caller's transaction, after the recipients exist: each channel an item names
    replaces that recipient's data for it (as a PUT), a channel left out is kept. Locks
    the recipients first, in id order; a constant number of queries."""
    push = {rid: data.push for rid, data in items.items() if data.push is not None}
    chat = {rid: data.chat for rid, data in items.items() if data.chat is not None}
    if not push and not chat:
        return
    with transaction.atomic():
        _lock([*push, *chat])
        if push:
            _replace_devices(push, reason=REPLACED, source=actor)
        if chat:
            _replace_connections(chat, reason=REPLACED, source=actor)


def channel_data_secrets(*, recipient_id: str) -> list[str]:
    """What of the recipient's channel data identifies them in stored text, for
    erasure to scrub wherever it scrubs their addresses (``device_secrets``,
    ``connection_secrets``)."""
    found: list[str] = []
    for device in PushDevice.objects.filter(recipient_id=recipient_id).only("token", "keys"):
        found += device_secrets(device)
    for connection in ChatConnection.objects.filter(recipient_id=recipient_id).only(
        "webhook_url", "user"
    ):
        found += connection_secrets(connection)
    return found


def device_secrets(device: PushDevice) -> list[str]:
    """A device's token (a Web Push endpoint) and its keys."""
    return [device.token, *(str(value) for value in (device.keys or {}).values())]


def connection_secrets(connection: ChatConnection) -> list[str]:
    """A connection's webhook URL and Slack user id (a Slack channel is shared: not
    theirs alone)."""
    return [text for text in (connection.webhook_url, connection.user) if text]


__all__ = [
    "PROVIDER_SOURCE",
    "channel_data_secrets",
    "channel_data_write",
    "chat_connection_remove",
    "chat_connections_clear",
    "chat_connections_get",
    "chat_connections_set",
    "connection_remove_dead",
    "connection_secrets",
    "device_secrets",
    "device_remove_dead",
    "push_device_add",
    "push_device_remove",
    "push_devices_clear",
    "push_devices_get",
    "push_devices_set",
]
