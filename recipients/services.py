"""Writing recipients: the set-based upsert shared by inline trigger recipients,
``PUT``/``PATCH /recipients/{id}/`` and ``POST /recipients/bulk/``. Input is validated
at the edges (``api.serializers.recipients``); this trusts it. Lists and memberships:
``recipients.lists``; preferences: ``recipients.preference_writes``; erasure (it
reaches the instances' history): ``executions.erasure``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from notifyflow.errors import ApplicationError, NotFoundError

from .channel_data import channel_data_write
from .channel_inputs import ChannelData
from .models import Recipient

# The fields a recipient's body may set besides ``id`` (``preferences`` have their own
# endpoint).
RECIPIENT_FIELDS = ("email", "phone", "timezone", "locale", "properties")


def recipients_upsert(*, items: Sequence[Mapping[str, Any]], actor: str = "api") -> set[str]:
    """Create each recipient, or set the fields its item names on the existing one
    (fields left out are kept; an explicit None clears). Items with the same fields go
    in one INSERT ... ON CONFLICT statement. An item's ``channel_data`` (a
    ``ChannelData``) replaces each channel it names (``channel_data.channel_data_write``;
    removals audited as ``actor``'s). Returns the ids that were created.

    The caller's transaction makes it atomic with what it writes next (a trigger's
    instances); alone it runs in its own."""
    if not items:
        return set()
    last: dict[str, Mapping[str, Any]] = {}
    channel_data: dict[str, ChannelData] = {}
    for item in items:  # a later item for the same id wins, as sequential PATCHes would
        last[item["id"]] = {**last.get(item["id"], {}), **item}
        data = item.get("channel_data")
        if data is not None:
            before = channel_data.get(item["id"], ChannelData())
            channel_data[item["id"]] = ChannelData(
                push=before.push if data.push is None else data.push,
                chat=before.chat if data.chat is None else data.chat,
            )
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for item in last.values():
        groups[tuple(name for name in RECIPIENT_FIELDS if name in item)].append(item)
    with transaction.atomic():
        existing = set(Recipient.objects.filter(pk__in=list(last)).values_list("pk", flat=True))
        # In id order: concurrent upserts of overlapping ids lock rows in one order.
        for fields, group in sorted(groups.items()):
            rows = [_row(item) for item in sorted(group, key=lambda item: item["id"])]
            if fields:
                Recipient.objects.bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["id"],
                    update_fields=[*fields, "updated_at"],
                )
            else:
                Recipient.objects.bulk_create(rows, ignore_conflicts=True)
        channel_data_write(items=channel_data, actor=actor)
    return set(last) - existing


def _row(item: Mapping[str, Any]) -> Recipient:
    values = {name: item[name] for name in RECIPIENT_FIELDS if name in item}
    if values.get("properties") is None and "properties" in values:
        values["properties"] = {}
    return Recipient(id=item["id"], **values)


def recipient_put(*, recipient_id: str, fields: Mapping[str, Any]) -> tuple[Recipient, bool]:
    """``PUT /recipients/{id}/``: create the recipient, or replace every field of the
    existing one (a field ``fields`` leaves out becomes null, ``properties`` {}).
    Preferences are not touched (they have their own endpoint). Returns (row, created)."""
    item: dict[str, Any] = {name: fields.get(name) for name in RECIPIENT_FIELDS}
    created = recipients_upsert(items=[{**item, "id": recipient_id}])
    return Recipient.objects.get(pk=recipient_id), recipient_id in created


def recipient_patch(*, recipient_id: str, fields: Mapping[str, Any]) -> Recipient:
    """``PATCH /recipients/{id}/``: set the fields ``fields`` names (an explicit None
    clears one), keep the others. NotFoundError for an unknown recipient."""
    with transaction.atomic():
        recipient = recipient_or_404(recipient_id, for_update=True)
        for name in RECIPIENT_FIELDS:
            if name in fields:
                value = fields[name]
                setattr(recipient, name, {} if name == "properties" and value is None else value)
        recipient.save()
    return recipient


def recipient_or_404(recipient_id: str, *, for_update: bool = False) -> Recipient:
    """The recipient ``recipient_id``, or NotFoundError ``not_found``."""
    queryset = Recipient.objects.select_for_update() if for_update else Recipient.objects
    recipient = queryset.filter(pk=recipient_id).first()
    if recipient is None:
        raise NotFoundError(
            code="not_found", field=None, message=f"no recipient with id {recipient_id!r}"
        )
    return recipient


@dataclass(frozen=True)
class RecipientBulkOutcome:
    """What became of one item of ``POST /recipients/bulk/``: ``created`` or
    ``updated`` (``recipient_id`` set), or ``invalid`` (``error`` set)."""

    status: Literal["created", "updated", "invalid"]
    recipient_id: str | None = None
    error: ApplicationError | None = None


def recipients_bulk_upsert(
    *, items: Sequence[Mapping[str, Any] | ApplicationError], actor: str = "api"
) -> list[RecipientBulkOutcome]:
    """Upsert each valid item as ``recipients_upsert`` does (fields left out are kept),
    all in one transaction; an ``ApplicationError`` item (refused at the edge) writes
    nothing and is answered ``invalid``. One outcome per item, in order."""
    valid = [item for item in items if not isinstance(item, ApplicationError)]
    created = recipients_upsert(items=valid, actor=actor)
    outcomes: list[RecipientBulkOutcome] = []
    for item in items:
        if isinstance(item, ApplicationError):
            outcomes.append(RecipientBulkOutcome("invalid", error=item))
        else:
            status: Literal["created", "updated"] = (
                "created" if item["id"] in created else "updated"
            )
            outcomes.append(RecipientBulkOutcome(status, recipient_id=item["id"]))
    return outcomes
