"""Lists (topics) and their members: ``PUT /lists/{key}/`` and the members'
``POST``/``DELETE``, set-based (one statement per request, whatever its size). Input is
validated at the edge (``api.serializers.lists``)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import Count, QuerySet

from notifyflow.errors import NotFoundError

from .models import ListMembership, Recipient, RecipientList
from .services import recipients_upsert

# The most recipients one members request may name.
MAX_MEMBERS_PER_REQUEST = 1000


def list_put(*, key: str, name: str) -> tuple[RecipientList, bool]:
    """Create the list ``key`` or rename it. Returns (list, created)."""
    recipient_list, created = RecipientList.objects.update_or_create(
        key=key, defaults={"name": name}
    )
    return recipient_list, created


def list_or_404(key: str) -> RecipientList:
    recipient_list = RecipientList.objects.filter(key=key).first()
    if recipient_list is None:
        raise NotFoundError(code="not_found", field=None, message=f"no list with key {key!r}")
    return recipient_list


def lists_with_member_counts() -> QuerySet[RecipientList]:
    """Every list with ``member_count`` (GET /lists/, the admin)."""
    return RecipientList.objects.annotate(member_count=Count("memberships"))


def list_members_add(*, key: str, recipient_ids: Sequence[str]) -> tuple[int, int]:
    """Add the recipients to list ``key`` (NotFoundError if unknown): ids not known yet
    are created empty, ids already members are left alone. One transaction, set-based.
    Returns (members added, recipients created)."""
    ids = sorted(set(recipient_ids))
    with transaction.atomic():
        recipient_list = list_or_404(key)
        created = recipients_upsert(items=[{"id": recipient_id} for recipient_id in ids])
        members = set(
            ListMembership.objects.filter(list=recipient_list, recipient_id__in=ids).values_list(
                "recipient_id", flat=True
            )
        )
        new = [rid for rid in ids if rid not in members]
        ListMembership.objects.bulk_create(
            [ListMembership(list=recipient_list, recipient_id=rid) for rid in new],
            ignore_conflicts=True,
        )
    return len(new), len(created)


def list_members_remove(*, key: str, recipient_ids: Sequence[str]) -> int:
    """Remove the recipients from list ``key`` (NotFoundError if unknown); ids that
    are not members are ignored. Returns how many memberships went."""
    recipient_list = list_or_404(key)
    deleted, _ = ListMembership.objects.filter(
        list=recipient_list, recipient_id__in=set(recipient_ids)
    ).delete()
    return deleted


def list_members(*, key: str) -> QuerySet[Recipient]:
    """The members of list ``key`` (NotFoundError if unknown), by id."""
    recipient_list = list_or_404(key)
    return Recipient.objects.filter(memberships__list=recipient_list).order_by("id")
