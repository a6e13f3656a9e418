"""Every opt-out - one-click, the unsubscribe page, the preferences API - reports
``recipient.unsubscribed`` in the transaction that writes it: once per scope newly set,
nothing for an opt-out already in place or rolled back. (An ESP's complaint:
tests/executions/test_tracking_events.py.)"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from recipients.preference_settings import preferences_set
from recipients.preferences import opt_out
from recipients.unsubscribe import token_for
from tests.factories import RecipientFactory
from tests.webhook_events import kicks, sent_to, subscribe

pytestmark = [pytest.mark.both_databases, pytest.mark.django_db, pytest.mark.usefixtures("kicks")]
__all__ = ["kicks"]


def unsubscribed(endpoint) -> list[tuple[str, str, str]]:
    return [
        (m.data["recipient"], m.data["scope"], m.data["source"])
        for m in sent_to(endpoint, type="recipient.unsubscribed")
    ]


def test_one_click_and_the_page_report_their_opt_out_once():
    endpoint = subscribe("recipient.unsubscribed")
    ada, bob = RecipientFactory(id="ada"), RecipientFactory(id="bob")
    client = Client(enforce_csrf_checks=True)
    one_click = f"/u/{token_for(recipient_id='ada', scope='categories.marketing')}/"
    for _ in range(2):  # a repeat changes nothing and reports nothing
        assert client.post(one_click, {"List-Unsubscribe": "One-Click"}).status_code == 200
    page = f"/u/{token_for(recipient_id=bob.pk, scope='workflows.news')}/"
    assert client.post(page, {"confirm": "1"}).status_code == 200
    assert sorted(unsubscribed(endpoint)) == [
        ("ada", "categories.marketing", "one_click"),
        ("bob", "workflows.news", "page"),
    ]
    first = sent_to(endpoint, data__recipient=ada.pk)[0]
    assert first.instance_id is None and first.sequence is None and first.workflow_key == ""
    assert "@" not in str(first.data)


def test_the_preferences_api_reports_each_scope_it_newly_opts_out_of():
    endpoint = subscribe("recipient.unsubscribed")
    RecipientFactory(id="ada", preferences={"channels": {"sms": False}})
    preferences_set(
        recipient_id="ada",
        preferences={
            "channels": {"sms": False, "email": False},
            "categories": {"news": {"channels": {"email": False}}, "deals": True},
        },
        merge=True,
    )
    assert sorted(unsubscribed(endpoint)) == [
        ("ada", "categories.news.channels.email", "api"),
        ("ada", "channels.email", "api"),
    ]


def test_an_opt_out_rolled_back_reports_nothing_and_an_unsubscribed_person_nothing_more():
    endpoint = subscribe("recipient.unsubscribed")
    RecipientFactory(id="ada")
    with pytest.raises(RuntimeError), transaction.atomic():
        assert opt_out(recipient_id="ada", scope="channels.email", source="admin")
        raise RuntimeError("the caller failed")
    assert not sent_to(endpoint)
    assert opt_out(recipient_id="ada", scope="channels.email", source="admin")
    assert not opt_out(recipient_id="ada", scope="channels.email", source="admin")
    assert not opt_out(recipient_id="gone", scope="channels.email", source="admin")
    assert unsubscribed(endpoint) == [("ada", "channels.email", "admin")]


def test_no_endpoint_for_opt_outs_means_no_message():
    other = subscribe("instance.completed")
    RecipientFactory(id="ada")
    assert opt_out(recipient_id="ada", scope="channels.email", source="api")
    assert not sent_to(other)
