"""Operator console: list fan-outs with their progress, read-only."""

from __future__ import annotations

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_operator, make_superuser
from tests.factories import FanOutFactory
from triggers.models.fanouts import FanOutStatus

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:triggers_fanout_changelist"


def logged_in(user) -> Client:
    client = Client()
    client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def test_changelist_shows_progress_and_status():
    client = logged_in(make_superuser())
    FanOutFactory(
        idempotency_key="launch-1",
        recipient_ids=[f"u{n}" for n in range(1000)],
        position=400,
        expected=1000,
        created=390,
        duplicates=10,
    )
    FanOutFactory(idempotency_key="launch-0", status=FanOutStatus.DONE, expected=5, created=5)
    FanOutFactory(idempotency_key="launch-2")  # has not read its lists yet
    response = client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    body = response.content.decode()
    assert "390 created + 10 duplicate(s) of 1,000 expected" in body
    assert 'title="40%"' in body
    assert "5 created of 5 expected" in body and 'title="100%"' in body
    assert "reading the lists" in body


def test_search_by_key_and_detail_is_read_only(settings):
    settings.NOTIFYFLOW_REDACT_PATHS = ["token"]
    client = logged_in(make_superuser())
    fanout = FanOutFactory(idempotency_key="launch-1", payload={"token": "s3cret", "x": 1})
    FanOutFactory(idempotency_key="launch-2")
    response = client.get(reverse(CHANGELIST), {"q": "launch-1"})
    assert [f.pk for f in response.context["cl"].result_list] == [fanout.pk]
    response = client.get(reverse(CHANGELIST), {"q": str(fanout.pk)})
    assert [f.pk for f in response.context["cl"].result_list] == [fanout.pk]

    change = reverse("admin:triggers_fanout_change", args=[fanout.pk])
    page = client.get(change)
    assert page.status_code == 200
    body = page.content.decode()
    assert "launch-1" in body and "s3cret" not in body  # payload paths redacted
    assert client.post(change, {"status": "done"}).status_code == 403
    assert client.get(reverse("admin:triggers_fanout_add")).status_code == 403


def test_operators_view_fanouts():
    client = logged_in(make_operator())
    fanout = FanOutFactory()
    assert client.get(reverse(CHANGELIST)).status_code == 200
    assert client.get(reverse("admin:triggers_fanout_change", args=[fanout.pk])).status_code == 200
