"""Reads of the catalogues: the cached lookup a render uses falls back along the chain,
records only real gaps and sees a save at once; a catalogue's gaps against the default
locale."""

from __future__ import annotations

import pytest

from translations.selectors import catalogue_gaps, translator
from translations.services import catalogue_put

pytestmark = pytest.mark.django_db


def test_region_falls_back_to_language_then_default_and_records_only_real_gaps():
    catalogue_put(locale="en", namespace="common", messages={"hi": "Hi", "bye": "Bye"})
    catalogue_put(locale="pt", namespace="common", messages={"hi": "Olá"})
    catalogue_put(locale="pt-BR", namespace="shop", messages={"hi": "Oi"})
    brazil = translator(locale="pt-BR", namespace="shop")
    assert brazil.gettext("hi") == "Oi"
    assert brazil.gettext("bye") == "Bye"
    assert brazil.gettext("nowhere") == "nowhere"
    assert brazil.missing == ["bye", "nowhere"]
    portugal = translator(locale="pt-PT", namespace="other")
    assert portugal.gettext("hi") == "Olá" and portugal.missing == []


def test_a_save_is_seen_by_the_next_render_of_this_process():
    catalogue_put(locale="en", namespace="common", messages={"hi": "Hi"})
    assert translator(locale="en", namespace="x").gettext("hi") == "Hi"
    catalogue_put(locale="en", namespace="common", messages={"hi": "Hello"})
    assert translator(locale="en", namespace="x").gettext("hi") == "Hello"


def test_plural_form_follows_the_locale_rules():
    forms = {"one": "%(count)s file", "few": "%(count)s pliki", "many": "%(count)s plików"}
    catalogue_put(
        locale="pl", namespace="common", messages={"files": {**forms, "other": "%(count)s pliku"}}
    )
    polish = translator(locale="pl", namespace="x")
    assert [polish.ngettext("files", "files", n) for n in (1, 3, 5)] == [
        forms["one"],
        forms["few"],
        forms["many"],
    ]


def test_gaps_are_the_default_locale_keys_a_catalogue_lacks(settings):
    settings.NOTIFYFLOW_DEFAULT_LOCALE = "en"
    catalogue_put(locale="en", namespace="shop", messages={"a": "A", "b": {"c": "C", "d": "D"}})
    french, _ = catalogue_put(locale="fr", namespace="shop", messages={"b": {"c": "Cé"}})
    assert catalogue_gaps(french) == ["a", "b.d"]
