"""The locale a step renders in and what its templates get for it: a test send's locale
(``TriggerInstance.locale``), else the device's (push), else the recipient's, else the
workflow's ``default_locale``, else NOTIFYFLOW_DEFAULT_LOCALE; a name Babel does not know
is passed over. What a render's ``t`` lacked is counted and named in the step log."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from notifyflow import metrics
from translations.locales import is_locale
from translations.selectors import translator
from translations.translator import Translator
from workflows.template_locale import LOCALE_VAR, TIMEZONE_VAR, TRANSLATIONS_VAR, locale_context

from .step import Audience, StepContext

# The context names a step log never keeps: the translator object, and what the output
# records as ``locale``.
LOCALE_NAMES = (TRANSLATIONS_VAR, LOCALE_VAR, TIMEZONE_VAR)
__all__ = [
    "LOCALE_NAMES",
    "TRANSLATIONS_VAR",
    "locale_scope",
    "other_locale_scope",
    "send_locale",
    "translation_output",
]


def send_locale(audience: Audience, *choices: str | None) -> str:
    """The first known locale of ``choices`` (an override - a test send's, a preview's -
    then a device's), the recipient's, the workflow's default and the setting."""
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


def other_locale_scope(step: StepContext, *, locale: str) -> dict[str, Any]:
    """``locale_scope`` for a render of ``step`` in a locale other than its own (a push
    device's): what that render lacks is reported with the step's own
    (``translation_output``)."""
    scope = locale_scope(step.audience, workflow_key=step.workflow_key, locale=locale)
    step.other_renders.append(scope[TRANSLATIONS_VAR])
    return scope


def translation_output(
    context: dict[str, Any], output: dict[str, Any], step: StepContext | None = None
) -> dict[str, Any]:
    """The step log's output with the locale a render used ``t`` in and the keys it
    lacked (``translation_missing``), and the keys each of the step's renders in other
    locales lacked (``translation_missing_by_locale: {locale: [key]}``, only the locales
    that lacked some), every missing key counted under its locale; ``output`` itself
    when no template used ``t``."""
    found = context.get(TRANSLATIONS_VAR)
    if isinstance(found, Translator) and found.used:
        output = {**output, "locale": found.locale}
        if found.missing:
            metrics.TRANSLATION_MISSING.labels(found.locale).inc(len(found.missing))
            output["translation_missing"] = list(found.missing)
    others = [other for other in (step.other_renders if step else ()) if other.missing]
    if others:
        for other in others:
            metrics.TRANSLATION_MISSING.labels(other.locale).inc(len(other.missing))
        by_locale = {other.locale: list(other.missing) for other in others}
        output = {**output, "translation_missing_by_locale": by_locale}
    return output
