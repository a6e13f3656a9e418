"""Sticky opt-outs: an opt-out the person made themselves (one-click,
the unsubscribe page, an ESP's unsubscribe or complaint) survives a preferences PUT or
PATCH that does not mention it - the next email stays unsent; only an explicit write of
that same setting to ``true`` reverses it, recorded as an audit row naming the API key
and a ``recipient.resubscribed`` status event. Opt-outs made through the API are not
sticky, and their rows name the key too."""

from __future__ import annotations

import itertools

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from api_keys.services import api_key_create
from executions import engine
from recipients.models import OptOut, Recipient
from recipients.preferences import opt_out
from recipients.unsubscribe import token_for
from tests.factories import RecipientFactory, TriggerInstanceFactory
from tests.webhook_events import kicks, sent_to, subscribe
from triggers.models import TriggerStatus
from workflows.services import workflow_save

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("kicks", "dispatched")]
__all__ = ["kicks"]

URL = "/api/v1/recipients/{}/preferences/"
NEWSLETTER = {
    "entry_node_id": "mail",
    "nodes": [{"id": "mail", "type": "email", "config": {"subject": "News", "body": "Hi"}}],
    "edges": [],
}
_workflows = itertools.count()


def _one_click(recipient_id: str, scope: str = "categories.news") -> None:
    token = token_for(recipient_id=recipient_id, scope=scope)
    answer = Client().post(f"/u/{token}/", {"List-Unsubscribe": "One-Click"})
    assert answer.status_code == 200


def _news_email_sent(recipient: Recipient) -> bool:
    """Run one email of the ``news`` category to ``recipient``: whether it was sent."""
    workflow = workflow_save(
        key=f"news-{next(_workflows)}",
        name="News",
        definition=NEWSLETTER,
        categories=["news"],
    )
    instance = TriggerInstanceFactory(workflow=workflow, recipient=recipient, payload={})
    before = len(mail.outbox)
    engine.step_execute(instance_id=instance.pk)
    instance.refresh_from_db()
    assert instance.status == TriggerStatus.COMPLETED
    return len(mail.outbox) > before


def _audit(recipient_id: str) -> list[tuple[str, str, str]]:
    rows = OptOut.objects.filter(recipient_id=recipient_id).order_by("at", "id")
    return list(rows.values_list("action", "scope", "source"))


def test_a_put_that_does_not_mention_a_one_click_opt_out_keeps_it(api):
    alice = RecipientFactory(id="alice")
    _one_click("alice")
    answer = api.put(URL.format("alice"), {}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["categories"] == {"news": False}
    answer = api.put(URL.format("alice"), {"categories": {"deals": True}}, format="json")
    assert answer.json()["categories"] == {"deals": True, "news": False}
    assert not _news_email_sent(alice)
    assert _audit("alice") == [("opt_out", "categories.news", "one_click")]


@pytest.mark.parametrize(
    "patch",
    [
        {"categories": None},
        {"categories": {"news": None}},
        {"categories": {"news": False}},
        {"channels": {"email": True}},
        {"workflows": {"other": True}},
    ],
)
def test_a_patch_that_does_not_write_it_true_keeps_it(api, patch):
    RecipientFactory(id="alice")
    _one_click("alice")
    answer = api.patch(URL.format("alice"), patch, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["categories"].get("news") is False
    assert Recipient.objects.get(pk="alice").preferences["categories"]["news"] is False


@pytest.mark.parametrize("source", ["page", "esp_unsubscribed", "esp_complained"])
def test_every_opt_out_of_the_person_is_sticky(api, source):
    RecipientFactory(id="alice")
    assert opt_out(recipient_id="alice", scope="workflows.digest", source=source)
    api.put(URL.format("alice"), {"workflows": {"other": False}}, format="json")
    prefs = Recipient.objects.get(pk="alice").preferences
    assert prefs["workflows"] == {"digest": False, "other": False}


def test_only_writing_that_setting_true_reverses_it_audited_and_reported(api):
    endpoint = subscribe("recipient.resubscribed", "recipient.unsubscribed")
    alice = RecipientFactory(id="alice")
    _one_click("alice")
    answer = api.put(URL.format("alice"), {"categories": {"news": True}}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["categories"] == {"news": True}
    assert _news_email_sent(alice)
    assert _audit("alice") == [
        ("opt_out", "categories.news", "one_click"),
        ("resubscribe", "categories.news", "api:tests"),
    ]
    (event,) = sent_to(endpoint, type="recipient.resubscribed")
    assert event.data == {"recipient": "alice", "scope": "categories.news", "source": "api:tests"}
    assert event.instance_id is None and event.sequence is None
    # Reversed: no longer sticky, so a PUT that leaves it out drops it.
    api.put(URL.format("alice"), {}, format="json")
    assert Recipient.objects.get(pk="alice").preferences["categories"] == {}
    # The person opts out again: sticky again.
    _one_click("alice")
    api.put(URL.format("alice"), {}, format="json")
    assert Recipient.objects.get(pk="alice").preferences["categories"] == {"news": False}


def test_a_patch_writing_true_reverses_it_and_names_its_key():
    RecipientFactory(id="alice")
    _one_click("alice", scope="workflows.weekly.channels.email")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='crm')[1]}")
    body = {"workflows": {"weekly": {"channels": {"email": True}}}}
    assert client.patch(URL.format("alice"), body, format="json").status_code == 200
    assert _audit("alice")[-1] == ("resubscribe", "workflows.weekly.channels.email", "api:crm")


def test_a_write_that_would_override_it_otherwise_is_409_and_changes_nothing(api):
    RecipientFactory(id="alice", preferences={"channels": {"sms": False}})
    _one_click("alice")
    before = Recipient.objects.get(pk="alice").preferences
    body = {"categories": {"news": {"channels": {"email": True}}}}
    answer = api.put(URL.format("alice"), body, format="json")
    assert answer.status_code == 409, answer.content
    assert (answer.json()["code"], answer.json()["field"]) == ("opted_out", "categories.news")
    assert Recipient.objects.get(pk="alice").preferences == before
    # The same for a channel the person opted out of, overridden by its entry's true.
    _one_click("alice", scope="workflows.weekly.channels.email")
    answer = api.patch(URL.format("alice"), {"workflows": {"weekly": True}}, format="json")
    assert answer.status_code == 409
    assert answer.json()["field"] == "workflows.weekly"


def test_an_entry_object_keeps_a_channel_opt_out_of_the_person(api):
    RecipientFactory(id="alice")
    _one_click("alice", scope="workflows.weekly.channels.email")
    body = {"workflows": {"weekly": {"channels": {"sms": True}}}}
    answer = api.put(URL.format("alice"), body, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["workflows"] == {"weekly": {"channels": {"sms": True, "email": False}}}


def test_opt_outs_made_through_the_api_are_not_sticky(api):
    alice = RecipientFactory(id="alice")
    api.put(URL.format("alice"), {"categories": {"news": False}}, format="json")
    api.put(URL.format("alice"), {}, format="json")
    assert Recipient.objects.get(pk="alice").preferences["categories"] == {}
    assert _news_email_sent(alice)
    assert _audit("alice") == [("opt_out", "categories.news", "api:tests")]


def test_a_one_click_on_an_api_opt_out_makes_it_the_person_s(api):
    RecipientFactory(id="alice")
    api.put(URL.format("alice"), {"categories": {"news": False}}, format="json")
    _one_click("alice")
    api.put(URL.format("alice"), {}, format="json")
    assert Recipient.objects.get(pk="alice").preferences["categories"] == {"news": False}
    assert _audit("alice") == [
        ("opt_out", "categories.news", "api:tests"),
        ("opt_out", "categories.news", "one_click"),
    ]
