"""Writing recipients: the set-based upsert shared by inline trigger recipients,
``PUT``/``PATCH /recipients/{id}/`` and ``POST /recipients/bulk/``. Input is validated
at the edges (``api.serializers.recipients``); this trusts it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction

from .models import Recipient

# The fields a recipient's body may set besides ``id`` (``preferences`` have their own
# endpoint).
RECIPIENT_FIELDS = ("email", "phone", "timezone", "locale", "properties")


def recipients_upsert(*, items: Sequence[Mapping[str, Any]]) -> set[str]:
    """Create each recipient, or set the fields its item names on the existing one
    (fields left out are kept; an explicit None clears). Items with the same fields go
    in one INSERT ... ON CONFLICT statement. Returns the ids that were created.

    The caller's transaction makes it atomic with what it writes next (a trigger's
    instances); alone it runs in its own."""
    if not items:
        return set()
    last: dict[str, Mapping[str, Any]] = {}
    for item in items:  # a later item for the same id wins, as sequential PATCHes would
        last[item["id"]] = {**last.get(item["id"], {}), **item}
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
    return set(last) - existing


def _row(item: Mapping[str, Any]) -> Recipient:
    values = {name: item[name] for name in RECIPIENT_FIELDS if name in item}
    if values.get("properties") is None and "properties" in values:
        values["properties"] = {}
    return Recipient(id=item["id"], **values)
