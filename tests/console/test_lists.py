"""Operator console: lists with their member counts (one query) and first members."""

from __future__ import annotations

import pytest
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from recipients.models import ListMembership
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import RecipientFactory, RecipientListFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:recipients_recipientlist_changelist"


@pytest.fixture
def admin_client_() -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=make_superuser().username, password=PASSWORD)
    return client


def members(lst, n: int) -> None:
    ListMembership.objects.bulk_create(
        ListMembership(list=lst, recipient=r) for r in RecipientFactory.create_batch(n)
    )


def test_changelist_shows_member_counts_in_one_query(admin_client_):
    weekly, launches, empty = (
        RecipientListFactory(key="weekly"),
        RecipientListFactory(key="launches"),
        RecipientListFactory(key="empty"),
    )
    members(weekly, 3)
    members(launches, 1)
    admin_client_.get(reverse(CHANGELIST))  # warm the session and permission caches
    with CaptureQueriesContext(connection) as queries:
        response = admin_client_.get(reverse(CHANGELIST))
    assert response.status_code == 200
    counts = {lst.key: lst.n_members for lst in response.context["cl"].result_list}
    assert counts == {"weekly": 3, "launches": 1, "empty": 0}
    membership_queries = [q["sql"] for q in queries if "listmembership" in q["sql"]]
    assert len(membership_queries) == 1, membership_queries
    assert empty.key in response.content.decode()


def test_list_page_shows_first_members_and_links_to_all(admin_client_):
    weekly = RecipientListFactory(key="weekly")
    ada = RecipientFactory(id="u-ada")
    ListMembership.objects.create(list=weekly, recipient=ada)
    members(weekly, 2)
    response = admin_client_.get(reverse("admin:recipients_recipientlist_change", args=[weekly.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert reverse("admin:recipients_recipient_change", args=["u-ada"]) in body
    assert "All 3 member(s)" in body
    assert reverse("admin:recipients_recipient_changelist") + "?list=weekly" in body


def test_add_a_list(admin_client_):
    response = admin_client_.post(
        reverse("admin:recipients_recipientlist_add"), {"key": "weekly", "name": "Weekly"}
    )
    assert response.status_code == 302
    response = admin_client_.post(
        reverse("admin:recipients_recipientlist_add"), {"key": "not a slug", "name": "x"}
    )
    assert response.status_code == 200
    assert "key" in response.context["adminform"].form.errors


def test_operators_view_lists():
    client = Client()
    client.login(request=HttpRequest(), username=make_operator().username, password=PASSWORD)
    weekly = RecipientListFactory()
    assert client.get(reverse(CHANGELIST)).status_code == 200
    change = reverse("admin:recipients_recipientlist_change", args=[weekly.pk])
    assert client.get(change).status_code == 200
    assert client.post(change, {"name": "renamed"}).status_code == 403
