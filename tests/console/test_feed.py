"""Operator console: a recipient's in-app feed - the counts and latest items on the
recipient's page, the whole feed as the feed items' changelist filtered by recipient,
an item's page; operators may view it, nobody edits it."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from feed.services import feed_item_mark
from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import RecipientFactory
from tests.factories import feed_items as make_items

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:feed_feeditem_changelist"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def _feed():
    ada, bob = RecipientFactory(id="ada"), RecipientFactory(id="bob")
    items = make_items(ada, 3)
    feed_item_mark(recipient_id="ada", item_id=items[0].pk, action="read", now=timezone.now())
    make_items(bob, 1)
    return ada, items


def test_the_recipient_page_shows_its_counts_and_latest_items():
    _feed()
    page = logged_in(make_superuser()).get(
        reverse("admin:recipients_recipient_change", args=["ada"])
    )
    body = page.content.decode()
    assert "In-app feed" in body
    assert "<strong>2</strong> unread, <strong>3</strong> unseen" in body
    assert "Item 0" in body and "Item 2" in body
    assert f"{reverse(CHANGELIST)}?recipient=ada" in body


def test_the_changelist_filtered_by_recipient_shows_only_their_feed_newest_first():
    _feed()
    body = logged_in(make_superuser()).get(reverse(CHANGELIST) + "?recipient=ada")
    text = body.content.decode()
    assert text.index("Item 2") < text.index("Item 1") < text.index("Item 0")
    assert ">bob<" not in text
    assert "unread, unseen" in text and ">read<" in text


def test_an_operator_may_view_but_not_change_a_feed_item():
    _, items = _feed()
    client = logged_in(make_operator())
    assert client.get(reverse(CHANGELIST)).status_code == 200
    page = client.get(reverse("admin:feed_feeditem_change", args=[items[0].pk]))
    assert page.status_code == 200
    assert "Item 0" in page.content.decode()
    assert 'name="_save"' not in page.content.decode()
