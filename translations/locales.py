"""Locales and messages as plain values: a locale's name checked with Babel, its fallback
chain, a catalogue's messages checked and flattened to dotted keys, and the plural form
Babel chooses for a count."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from babel import Locale, UnknownLocaleError

from notifyflow.errors import ApplicationError

# CLDR's plural categories: an object whose keys are all among them (``other`` required)
# is one plural message, not a level of nesting.
PLURAL_FORMS = frozenset({"zero", "one", "two", "few", "many", "other"})
MAX_KEY_LENGTH = 200


def locale_check(locale: str, *, field: str = "locale") -> str:
    """``locale`` if Babel knows it (``en``, ``pt-BR``, ``zh-Hant-TW``); else a 400
    ``invalid_locale`` naming ``field``."""
    if not isinstance(locale, str) or not 2 <= len(locale) <= 35 or "_" in locale:
        raise _invalid(locale, field)
    try:
        Locale.parse(locale, sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        raise _invalid(locale, field) from None
    return locale


@lru_cache(maxsize=1024)
def is_locale(locale: str) -> bool:
    """Whether ``locale`` is a name ``locale_check`` accepts (cached: asked per step)."""
    try:
        locale_check(locale)
    except ApplicationError:
        return False
    return True


def _invalid(locale: Any, field: str) -> ApplicationError:
    return ApplicationError(
        code="invalid_locale",
        field=field,
        message=f"{field}: {str(locale)[:40]!r} is not a locale (BCP 47: en, pt-BR)",
    )


def locale_chain(locale: str, default: str) -> tuple[str, ...]:
    """Where a message is looked for, in order: ``pt-BR`` -> ``pt`` -> the default."""
    chain = [locale]
    language = locale.split("-", 1)[0]
    if language != locale:
        chain.append(language)
    for fallback in (default, default.split("-", 1)[0]):
        if fallback not in chain:
            chain.append(fallback)
    return tuple(chain)


@lru_cache(maxsize=256)
def _plural_rule(locale: str) -> Any:
    try:
        return Locale.parse(locale, sep="-").plural_form
    except (UnknownLocaleError, ValueError):
        return Locale.parse("en").plural_form


def plural_form(locale: str, count: int) -> str:
    """The CLDR category of ``count`` in ``locale`` (``one``, ``few``, ``other``...)."""
    return _plural_rule(locale)(abs(count))


def is_plural(value: Any) -> bool:
    return isinstance(value, dict) and "other" in value and set(value) <= PLURAL_FORMS


def messages_check(messages: Any, *, field: str = "messages") -> dict[str, Any]:
    """``messages`` if it is an object of strings or nested objects; else a 400
    ``invalid_messages`` naming the path of the first bad value."""
    if not isinstance(messages, dict):
        raise _bad(field, "must be an object of strings or nested objects")
    for key, value in messages.items():
        where = f"{field}.{key}"
        if not isinstance(key, str) or not key or "." in key or len(key) > MAX_KEY_LENGTH:
            raise _bad(where, "a key is 1-200 characters without '.' (nest objects instead)")
        if isinstance(value, dict):
            if not value:
                raise _bad(where, "must not be an empty object")
            messages_check(value, field=where)
        elif not isinstance(value, str):
            raise _bad(where, "must be a string or an object")
    return messages


def _bad(field: str, message: str) -> ApplicationError:
    return ApplicationError(code="invalid_messages", field=field, message=f"{field}: {message}")


def flatten(messages: dict[str, Any], prefix: str = "") -> dict[str, str | dict[str, str]]:
    """Dotted keys to messages (a plural message stays an object of its forms)."""
    flat: dict[str, Any] = {}
    for key, value in messages.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and not is_plural(value):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat
