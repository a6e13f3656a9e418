"""``Translator``: the gettext-style object python-liquid's ``t`` filter asks for a
message, holding one render's catalogue and recording what it lacked."""

from __future__ import annotations

from typing import Any

from .locales import is_plural, plural_form


class Translator:
    """Messages of one locale (``primary``: its own and its language's) over the default
    locale's (``fallback``). A key missing from ``primary`` renders the default's text,
    or the key itself if that lacks it too - never an empty string - and is recorded in
    ``missing``. Message context (``pgettext``) is not used: keys are already dotted
    names."""

    def __init__(
        self,
        *,
        locale: str,
        default: str,
        primary: dict[str, Any],
        fallback: dict[str, Any],
    ) -> None:
        self.locale, self.default = locale, default
        self.primary, self.fallback = primary, fallback
        self.missing: list[str] = []
        # Whether a template asked for a message (the step log then names the locale).
        self.used = False

    def _lookup(self, key: str) -> tuple[Any, str]:
        self.used = True
        value = self.primary.get(key)
        if value:
            return value, self.locale
        if key not in self.missing:
            self.missing.append(key)
        return self.fallback.get(key) or key, self.default

    def gettext(self, message: str) -> str:
        value, _ = self._lookup(message)
        return value["other"] if is_plural(value) else value

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        value, locale = self._lookup(singular)
        if not is_plural(value):
            return value
        return value.get(plural_form(locale, n)) or value["other"]

    def pgettext(self, context: str, message: str) -> str:
        return self.gettext(message)

    def npgettext(self, context: str, singular: str, plural: str, n: int) -> str:
        return self.ngettext(singular, plural, n)
