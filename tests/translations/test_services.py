"""Catalogues: put replaces, checks locale, namespace and messages naming the path;
delete of a missing one is not found."""

from __future__ import annotations

import pytest

from notifyflow.errors import ApplicationError, NotFoundError
from translations.models import Catalogue
from translations.selectors import catalogue_get
from translations.services import catalogue_delete, catalogue_put

pytestmark = pytest.mark.django_db


def test_put_replaces_the_whole_catalogue():
    catalogue_put(locale="fr", namespace="common", messages={"a": "A", "b": "B"})
    catalogue, created = catalogue_put(locale="fr", namespace="common", messages={"c": "C"})
    assert not created
    assert catalogue_get(locale="fr", namespace="common").messages == {"c": "C"}
    assert Catalogue.objects.count() == 1


@pytest.mark.parametrize("locale", ["english", "pt_BR", "xx-YY-zz-1", "", "e"])
def test_put_refuses_a_name_that_is_not_a_locale(locale):
    with pytest.raises(ApplicationError) as caught:
        catalogue_put(locale=locale, namespace="common", messages={})
    assert (caught.value.code, caught.value.field) == ("invalid_locale", "locale")


@pytest.mark.parametrize("locale", ["en", "pt-BR", "zh-Hant-TW", "de-CH"])
def test_put_takes_bcp47_locales(locale):
    assert catalogue_put(locale=locale, namespace="common", messages={"a": "A"})[1]


def test_put_refuses_a_namespace_that_is_not_a_slug():
    with pytest.raises(ApplicationError) as caught:
        catalogue_put(locale="en", namespace="Not A Slug", messages={})
    assert caught.value.code == "invalid_namespace"


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ({"order": {"title": 3}}, "messages.order.title"),
        ({"order": {"items": ["a"]}}, "messages.order.items"),
        ({"a.b": "dotted"}, "messages.a.b"),
        ({"empty": {}}, "messages.empty"),
        (["not", "an", "object"], "messages"),
    ],
)
def test_put_refuses_messages_naming_the_bad_path(messages, field):
    with pytest.raises(ApplicationError) as caught:
        catalogue_put(locale="en", namespace="common", messages=messages)
    assert (caught.value.code, caught.value.field) == ("invalid_messages", field)
    assert not Catalogue.objects.exists()


def test_delete_of_a_missing_catalogue_is_not_found():
    with pytest.raises(NotFoundError):
        catalogue_delete(locale="en", namespace="common")
