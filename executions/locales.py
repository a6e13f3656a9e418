"""The locale a step renders in and what its templates get for it: the device's (push),
else the recipient's, else the workflow's ``default_locale``, else
NOTIFYFLOW_DEFAULT_LOCALE; a name Babel does not know is passed over."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from notifyflow import metrics
from translations.locales import is_locale
from translations.selectors import translator
from translations.translator import Translator
from workflows.template_locale import LOCALE_VAR, TIMEZONE_VAR, TRANSLATIONS_VAR, locale_context

from .step import Audience

# The context names a step log never keeps: the translator object, and what the output
# records as ``locale``.
LOCALE_NAMES = (TRANSLATIONS_VAR, LOCALE_VAR, TIMEZONE_VAR)
__all__ = ["LOCALE_NAMES", "TRANSLATIONS_VAR", "locale_scope", "send_locale", "translation_output"]


def send_locale(audience: Audience, *choices: str | None) -> str:
    """The first known locale of ``choices`` (a device's, an override), the recipient's,
    the workflow's default and the setting."""
    person = audience.recipient
    for locale in (*choices, person.locale if person else None, audience.default_locale):
        if locale and is_locale(locale):
            return locale
    return settings.NOTIFYFLOW_DEFAULT_LOCALE


def locale_scope(audience: Audience, *, workflow_key: str, locale: str) -> dict[str, Any]:
    """What a context adds so ``t`` and the Babel filters render in ``locale`` (the
    recipient's timezone for dates)."""
    person = audience.recipient
    found = translator(locale=locale, namespace=workflow_key, default=audience.default_locale)
    return locale_context(found, locale, person.timezone if person else None)


def translation_output(context: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    """The step log's output with the locale a render used ``t`` in and the keys it
    lacked (counted); ``output`` itself when no template used ``t``."""
    found = context.get(TRANSLATIONS_VAR)
    if not isinstance(found, Translator) or not found.used:
        return output
    if found.missing:
        metrics.TRANSLATION_MISSING.labels(found.locale).inc(len(found.missing))
        return {**output, "locale": found.locale, "translation_missing": list(found.missing)}
    return {**output, "locale": found.locale}
