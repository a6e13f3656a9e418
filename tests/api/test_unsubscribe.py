"""``/u/{token}/`` (RFC 8058): GET shows a confirmation page and changes
nothing; POST (no auth, no CSRF token) opts out, idempotently; bad tokens get a 400
page."""

from __future__ import annotations

import pytest
from django.test import Client

from recipients.models import OptOut, Recipient
from recipients.unsubscribe import token_for
from tests.factories import RecipientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return Client(enforce_csrf_checks=True)  # as a mail client: no CSRF token


def url(token: str) -> str:
    return f"/u/{token}/"


def test_get_shows_a_confirmation_form_and_changes_nothing(client):
    person = RecipientFactory()
    response = client.get(url(token_for(recipient_id=person.pk, scope="categories.marketing")))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<form method="post"' in page and "<button" in page
    assert "“marketing” messages" in page
    assert response["Cache-Control"] == "no-store"
    assert Recipient.objects.get(pk=person.pk).preferences == {}
    assert not OptOut.objects.exists()


def test_one_click_post_opts_out_once_and_is_idempotent(client):
    person = RecipientFactory(preferences={"categories": {"news": True}})
    token = token_for(recipient_id=person.pk, scope="categories.marketing")
    for _ in range(2):
        response = client.post(url(token), {"List-Unsubscribe": "One-Click"})
        assert response.status_code == 200
        assert "You are unsubscribed" in response.content.decode()
    assert Recipient.objects.get(pk=person.pk).preferences == {
        "categories": {"news": True, "marketing": False}
    }
    (row,) = OptOut.objects.filter(recipient=person)
    assert (row.scope, row.source) == ("categories.marketing", "one_click")


def test_the_pages_button_records_the_page_as_source(client):
    person = RecipientFactory()
    token = token_for(recipient_id=person.pk, scope="workflows.news")
    assert client.post(url(token), {"confirm": "1"}).status_code == 200
    assert OptOut.objects.get(recipient=person).source == "page"
    assert Recipient.objects.get(pk=person.pk).preferences == {"workflows": {"news": False}}


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_tampered_token_gets_a_400_page_and_changes_nothing(client, method):
    person = RecipientFactory()
    token = token_for(recipient_id=person.pk, scope="workflows.news")
    response = getattr(client, method)(url(token[:-2] + "xx"))
    assert response.status_code == 400
    assert "not valid" in response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert Recipient.objects.get(pk=person.pk).preferences == {}
    assert not OptOut.objects.exists()


def test_an_erased_recipients_link_still_answers_200_and_writes_nothing(client):
    token = token_for(recipient_id="gone", scope="workflows.news")
    assert client.post(url(token), {"List-Unsubscribe": "One-Click"}).status_code == 200
    assert not OptOut.objects.exists()
