"""The catalogues' admin: add and edit messages as JSON, checked like the API (a bad
value is an error on the form naming its path, nothing saved), and the keys a locale
lacks against the default locale."""

from __future__ import annotations

import json

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from tests.admin_helpers import PASSWORD, make_superuser
from translations.models import Catalogue
from translations.selectors import translator
from translations.services import catalogue_put

pytestmark = pytest.mark.django_db


@pytest.fixture
def console() -> Client:
    client = Client()
    user = make_superuser()
    assert client.login(request=HttpRequest(), username=user.username, password=PASSWORD)
    return client


def test_add_saves_through_the_service_and_is_seen_by_renders(console):
    translator(locale="fr", namespace="common")  # cached before the save
    body = {"locale": "fr", "namespace": "common", "messages": json.dumps({"hi": "Salut"})}
    response = console.post(reverse("admin:translations_catalogue_add"), body)
    assert response.status_code == 302
    saved = Catalogue.objects.get()
    assert saved.messages == {"hi": "Salut"} and saved.updated_by.startswith("console:")
    assert translator(locale="fr", namespace="common").gettext("hi") == "Salut"


def test_bad_messages_are_refused_naming_the_path(console):
    body = {"locale": "fr", "namespace": "common", "messages": json.dumps({"a": {"b": 3}})}
    response = console.post(reverse("admin:translations_catalogue_add"), body)
    assert response.status_code == 200
    assert "messages.a.b: must be a string or an object" in response.content.decode()
    assert not Catalogue.objects.exists()


def test_change_page_shows_the_keys_missing_against_the_default_locale(console):
    catalogue_put(locale="en", namespace="shop", messages={"a": "A", "b": {"c": "C"}})
    french, _ = catalogue_put(locale="fr", namespace="shop", messages={"a": "Á"})
    page = console.get(reverse("admin:translations_catalogue_change", args=[french.pk]))
    assert "<code>b.c</code>" in page.content.decode()


def test_workflow_form_refuses_a_key_the_default_locale_lacks_and_saves_default_locale(console):
    from tests.console.test_workflows import form_data
    from tests.factories import email_definition
    from workflows.models import Workflow

    catalogue_put(locale="fr", namespace="hello", messages={"hi": "Salut"})
    definition = email_definition('{{ "hi" | t }}')
    response = console.post(reverse("admin:workflows_workflow_add"), form_data("hello", definition))
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["definition"]
    assert "Node “mail”, field nodes[0].config.body" in error and "'hi'" in error
    data = {**form_data("hello", definition), "default_locale": "fr"}
    saved = console.post(reverse("admin:workflows_workflow_add"), data)
    assert saved.status_code == 302
    assert Workflow.objects.get(key="hello").default_locale == "fr"
