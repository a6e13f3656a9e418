"""The recipients services: PUT replaces, PATCH merges, bulk answers per item and writes
only valid items; members are added and removed set-based."""

from __future__ import annotations

import math

import pytest
from django.db import connection

from notifyflow.errors import ApplicationError, NotFoundError
from recipients.lists import list_members, list_members_add, list_members_remove, list_put
from recipients.models import ListMembership, Recipient
from recipients.services import recipient_patch, recipient_put, recipients_bulk_upsert
from tests.factories import RecipientFactory, RecipientListFactory

pytestmark = pytest.mark.django_db


def test_put_replaces_every_field_and_reports_creation():
    recipient, created = recipient_put(
        recipient_id="u1", fields={"email": "a@example.com", "properties": {"a": 1}}
    )
    assert created and recipient.email == "a@example.com"
    recipient, created = recipient_put(recipient_id="u1", fields={"locale": "fr"})
    assert not created
    assert (recipient.email, recipient.locale, recipient.properties) == (None, "fr", {})


def test_patch_sets_only_the_named_fields():
    RecipientFactory(id="u1", email="a@example.com", locale="en", properties={"a": 1})
    recipient = recipient_patch(recipient_id="u1", fields={"properties": None, "locale": "de"})
    assert (recipient.email, recipient.locale, recipient.properties) == ("a@example.com", "de", {})
    with pytest.raises(NotFoundError):
        recipient_patch(recipient_id="nobody", fields={})


def test_bulk_writes_the_valid_items_and_answers_each():
    RecipientFactory(id="old")
    refused = ApplicationError(code="invalid_phone", field="phone", message="phone: bad")
    outcomes = recipients_bulk_upsert(items=[{"id": "new"}, refused, {"id": "old", "locale": "fr"}])
    assert [(o.status, o.recipient_id) for o in outcomes] == [
        ("created", "new"),
        ("invalid", None),
        ("updated", "old"),
    ]
    assert outcomes[1].error is refused
    assert Recipient.objects.get(pk="old").locale == "fr"


def test_adding_members_is_set_based(django_assert_max_num_queries):
    RecipientListFactory(key="all")
    ids = [f"u{n:03d}" for n in range(300)]
    # Statements per batch of rows, not per row: SQLite caps a statement's parameters,
    # so Django splits one bulk INSERT of 300 recipients into several there.
    fields = Recipient._meta.concrete_fields
    batches = math.ceil(len(ids) / connection.ops.bulk_batch_size(fields, ids))
    with django_assert_max_num_queries(9 + batches):
        added, created = list_members_add(key="all", recipient_ids=ids)
    assert (added, created) == (300, 300)
    assert list_members_add(key="all", recipient_ids=ids[:10] + ["x"]) == (1, 1)
    assert list(list_members(key="all").values_list("pk", flat=True)[:2]) == ["u000", "u001"]


def test_removing_members_and_renaming_a_list():
    recipient_list, created = list_put(key="k", name="K")
    assert created
    assert list_put(key="k", name="Renamed") == (recipient_list, False)
    list_members_add(key="k", recipient_ids=["a", "b"])
    assert list_members_remove(key="k", recipient_ids=["a", "zz"]) == 1
    assert list(ListMembership.objects.values_list("recipient_id", flat=True)) == ["b"]
    with pytest.raises(NotFoundError):
        list_members_remove(key="nope", recipient_ids=["b"])


def test_a_bulk_that_fails_midway_writes_nothing(monkeypatch):
    """Items with different fields are written by separate statements: one failing
    takes the others back with it (one transaction)."""
    real = Recipient.objects.bulk_create
    calls = []

    def second_fails(rows, **kwargs):
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("connection lost")
        return real(rows, **kwargs)

    monkeypatch.setattr(Recipient.objects, "bulk_create", second_fails)
    with pytest.raises(RuntimeError):
        recipients_bulk_upsert(items=[{"id": "a", "email": "a@example.com"}, {"id": "b"}])
    assert len(calls) == 2
    assert not Recipient.objects.exists()
