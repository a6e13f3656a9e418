"""The ``t`` filter and Babel's filters in our templates: interpolation, plural forms by
the locale's rules, a message's stray ``%``, HTML escaping of values, the filters
working without a locale, and the keys a template uses."""

from __future__ import annotations

from translations.translator import Translator
from workflows.template_locale import locale_context
from workflows.templating import check_template, render, translation_keys

MESSAGES = {
    "hi": "Bonjour %(name)s",
    "items": {"one": "%(count)s article", "other": "%(count)s articles"},
    "sale": "50% off",
}


def context(locale: str = "fr", **payload) -> dict:
    found = Translator(locale=locale, default="en", primary=MESSAGES, fallback={"only": "Only"})
    return {"payload": payload, **locale_context(found, locale, "Europe/Paris")}


def test_t_interpolates_and_escapes_values_in_html():
    source = '{{ "hi" | t: name: payload.name }}'
    assert render(source, context(name="Ana")) == "Bonjour Ana"
    assert render(source, context(name="<b>"), html=True) == "Bonjour &lt;b&gt;"


def test_count_chooses_the_plural_form_of_the_locale():
    source = '{{ "items" | t: count: payload.n }}'
    # French: 0 and 1 are singular.
    assert [render(source, context(n=n)) for n in (0, 1, 2)] == [
        "0 article",
        "1 article",
        "2 articles",
    ]
    assert render(source, context("en", n=0)) == "0 articles"


def test_a_percent_sign_in_a_message_is_kept():
    assert render('{{ "sale" | t }}', context()) == "50% off"


def test_babel_filters_format_for_the_locale_and_timezone():
    source = '{{ 1234.5 | currency: "EUR" }} {{ 1234.5 | decimal }} {{ payload.at | datetime }}'
    assert render(source, context(at="2026-03-05T10:00:00Z")) == (
        "1\u202f234,50\u00a0€ 1\u202f234,5 5 mars 2026, 11:00:00"
    )


def test_filters_render_without_a_locale_in_the_context():
    check_template('{{ "hi" | t }} {{ 3 | currency: "USD" }}')
    assert render('{{ "hi" | t }} {{ 3 | currency: "USD" }}', {}) == "hi $3.00"


def test_translation_keys_lists_literal_keys_once():
    source = '{{ "a.b" | t }}{% if x %}{{ "c" | t: count: 2 }}{% endif %}{{ "a.b" | t }}{{ v | t }}'
    assert translation_keys(source) == ["a.b", "c"]


def test_speaks_locale_names_templates_whose_output_depends_on_the_locale():
    from workflows.templating import speaks_locale

    assert speaks_locale('{{ "k" | t }}') and speaks_locale("{{ payload.at | datetime }}")
    assert not speaks_locale("Order {{ payload.order | upcase }}")
