"""Locale names, fallback chains and message flattening."""

from __future__ import annotations

from translations.locales import flatten, is_locale, locale_chain


def test_chain_goes_region_then_language_then_default():
    assert locale_chain("pt-BR", "en") == ("pt-BR", "pt", "en")
    assert locale_chain("en-GB", "en") == ("en-GB", "en")
    assert locale_chain("de", "en-US") == ("de", "en-US", "en")


def test_nested_keys_flatten_to_dotted_names_keeping_plural_objects():
    messages = {"order": {"shipped": {"title": "T", "items": {"one": "1", "other": "n"}}}}
    assert flatten(messages) == {
        "order.shipped.title": "T",
        "order.shipped.items": {"one": "1", "other": "n"},
    }


def test_only_known_locales_are_locales():
    assert is_locale("pt-BR") and is_locale("fr")
    assert not is_locale("klingon") and not is_locale("pt_BR")
