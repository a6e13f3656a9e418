"""The filters that speak the send's language: ``t`` (python-liquid's translation
filter over the catalogues of ``translations``) and Babel's ``datetime``, ``decimal`` and
``currency``, each reading the render's locale from the context names below; and the
keys a template asks ``t`` for (python-liquid's message extraction).

``{{ "order.shipped.title" | t }}``, ``{{ "greeting" | t: name: recipient.properties.name }}``
(``%(name)s`` in the message), ``{{ "cart.items" | t: count: payload.n }}`` (a plural
message: ``{"one": "...", "other": "..."}``, the form chosen by the locale's CLDR rules).
"""

from __future__ import annotations

from typing import Any

from liquid import Environment, RenderContext
from liquid.extra.filters.babel import Currency, DateTime, Number
from liquid.extra.filters.translate import Translate
from liquid.messages import extract_from_template
from liquid.stringify import to_liquid_string
from markupsafe import Markup

# The context names a render carries for these filters (``locale_context``): not
# template variables - a template reads ``recipient.locale`` for that.
TRANSLATIONS_VAR = "_translations"
LOCALE_VAR = "_locale"
TIMEZONE_VAR = "_timezone"


class TranslateKey(Translate):
    """python-liquid's ``t``, where a ``count`` alone picks a plural form (the key's
    message holds the forms) and a stray ``%`` in a message is left as written."""

    def __call__(
        self,
        __left: object,
        __message_context: object = None,
        *,
        context: RenderContext,
        **kwargs: Any,
    ) -> str:
        count = kwargs.get("count")
        if "plural" in kwargs or isinstance(count, bool) or count is None:
            return super().__call__(__left, __message_context, context=context, **kwargs)
        # python-liquid's own count check takes 1 for True (``1 in (True,)``) and would
        # never choose the singular: the plural is chosen here.
        try:
            n = int(count)
        except (TypeError, ValueError):
            n = 0
        key = to_liquid_string(__left, autoescape=False)
        text = self._resolve_translations(context).ngettext(key, key, n)
        if context.env.autoescape:
            text = Markup(text)
        return self.format_message(context, text, kwargs)

    def format_message(
        self, context: RenderContext, message_text: str, message_vars: dict[str, Any]
    ) -> str:
        if "%" not in message_text:
            return message_text
        formatted = self.re_vars.sub(
            lambda match: super(TranslateKey, self).format_message(
                context, match.group(0), message_vars
            ),
            message_text,
        )
        return type(message_text)(formatted) if type(message_text) is not str else formatted


# The context names python-liquid's Babel filters read, each with its ``default_*``.
_BABEL_VARS = (
    "locale",
    "input_locale",
    "timezone",
    "input_timezone",
    "format",
    "decimal_quantization",
    "currency_code",
)


class WithDefaults:
    """A Babel filter that finds every context name it reads: our templates' undefined
    is strict, and python-liquid resolves some of them without a default."""

    def __call__(self, left: object, *args: Any, context: RenderContext, **kwargs: Any) -> str:
        values = {name: context.resolve(name, default=value) for name, value in self.defaults()}
        with context.extend(namespace=values):
            return super().__call__(left, *args, context=context, **kwargs)  # type: ignore[misc]

    def defaults(self) -> list[tuple[str, Any]]:
        found = self.__dict__.get("_defaults")
        if found is None:
            found = []
            for name in _BABEL_VARS:
                if hasattr(self, f"{name}_var"):
                    value = getattr(self, f"default_{name}")
                    value = getattr(value, "zone", value)  # a pytz zone: its name
                    value = str(value) if name.endswith("locale") else value
                    found.append((getattr(self, f"{name}_var"), value))
            self.__dict__["_defaults"] = found
        return found


class LocaleNumber(WithDefaults, Number):
    pass


class LocaleDateTime(WithDefaults, DateTime):
    pass


class CurrencyCode(WithDefaults, Currency):
    """Babel's ``currency`` with the code as its argument: ``| currency: "EUR"``."""

    def __call__(  # type: ignore[override]
        self, left: object, code: object = None, *, context: RenderContext, **kwargs: Any
    ) -> str:
        if code is None:
            return super().__call__(left, context=context, **kwargs)
        with context.extend(namespace={self.currency_code_var: str(code)}):
            return super().__call__(left, context=context, **kwargs)


# The filters whose output depends on the render's locale.
LOCALE_FILTERS = frozenset({"t", "currency", "decimal", "datetime"})


def add_locale_filters(environment: Environment) -> None:
    escape = environment.autoescape
    environment.filters["t"] = TranslateKey(
        translations_var=TRANSLATIONS_VAR, autoescape_message=escape
    )
    environment.filters["currency"] = CurrencyCode(locale_var=LOCALE_VAR)
    environment.filters["decimal"] = LocaleNumber(locale_var=LOCALE_VAR)
    environment.filters["datetime"] = LocaleDateTime(
        locale_var=LOCALE_VAR, timezone_var=TIMEZONE_VAR
    )


def locale_context(translator: Any, locale: str, timezone: str | None) -> dict[str, Any]:
    """What a render's context adds so ``t`` and the Babel filters use ``locale``."""
    context = {TRANSLATIONS_VAR: translator, LOCALE_VAR: locale.replace("-", "_")}
    if timezone:
        context[TIMEZONE_VAR] = timezone
    return context


def message_keys(template: Any) -> list[str]:
    """The keys a compiled template passes to ``t`` as string literals, in order."""
    keys: list[str] = []
    for message in extract_from_template(template, keywords=["t"]):
        key = message.message[0] if isinstance(message.message[0], str) else message.message[1]
        if isinstance(key, str) and key not in keys:
            keys.append(key)
    return keys
