"""The console creates recipients under the API's id rule (issue 39 item 4): an id no
path can address (``bulk``, ``..``, one with ``/``) or one that is not printable is a
form error, so every recipient made in the console can also be reached by the API."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from recipients.models import Recipient
from tests.admin_helpers import make_superuser
from tests.console.test_recipients import logged_in

pytestmark = pytest.mark.django_db

ADD = "admin:recipients_recipient_add"


@pytest.fixture
def admin() -> Client:
    return logged_in(make_superuser())


FORMSETS = {
    "memberships-TOTAL_FORMS": "0",
    "memberships-INITIAL_FORMS": "0",
    "opt_outs-TOTAL_FORMS": "0",
    "opt_outs-INITIAL_FORMS": "0",
}


@pytest.mark.parametrize(
    "recipient_id,code",
    [
        ("bulk", "reserved_id"),
        ("..", "reserved_id"),
        ("org/7", "reserved_id"),
        ("a\u202eb", "bidi_control"),
        ("a\x1bb", "control_character"),
    ],
)
def test_the_add_form_refuses_an_id_the_api_would_refuse(admin, recipient_id, code):
    response = admin.post(reverse(ADD), {"id": recipient_id, **FORMSETS})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors.as_data()
    assert [error.code for error in errors["id"]] == [code]
    assert not Recipient.objects.exists()


def test_the_add_form_creates_an_ordinary_id(admin):
    response = admin.post(reverse(ADD), {"id": "user 7 é", **FORMSETS})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Recipient.objects.filter(pk="user 7 é").exists()
