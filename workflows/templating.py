"""Liquid templates: one strict environment for rendering, one lenient one for conditions,
all made by ``liquid_environment`` with the resource limits of the
``NOTIFYFLOW_TEMPLATE_*`` settings.

Compiled templates are cached by source text, so a worker parses each template once.
A template that hits a limit (loop iterations, output size, local namespace) raises
``TemplateError`` like any other render error: the engine makes that a permanent failure
naming the node, never a hang or an exhausted worker.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from liquid import Environment, StrictDefaultUndefined
from liquid.exceptions import LiquidError, ResourceLimitError
from liquid.undefined import Undefined

from .template_filters import bound_filters
from .template_locale import LOCALE_FILTERS, add_locale_filters, message_keys


class TemplateError(Exception):
    """A template failed to parse or render; ``str()`` says where."""


class TemplateLimitError(TemplateError):
    """A template hit a resource limit (loop iterations, output size, namespace size)."""


def liquid_environment(
    *, undefined: type[Undefined] = Undefined, autoescape: bool = False
) -> Environment:
    """The one way to make a Liquid environment: python-liquid keeps its limits as class
    attributes, so each environment is an instance of a subclass carrying the limits
    from settings (``NOTIFYFLOW_TEMPLATE_*``)."""
    limited = type(
        "LimitedEnvironment",
        (Environment,),
        {
            "loop_iteration_limit": settings.NOTIFYFLOW_TEMPLATE_LOOP_LIMIT,
            "output_stream_limit": settings.NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT,
            "local_namespace_limit": settings.NOTIFYFLOW_TEMPLATE_NAMESPACE_LIMIT,
        },
    )
    environment = limited(undefined=undefined, autoescape=autoescape)
    # The output limit is checked as text is written; a filter could build far more
    # before that (``split: "" | join: s`` is quadratic): bound each one before it runs.
    environment.filters = bound_filters(
        environment.filters, limit=settings.NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT
    )
    # Added unwrapped: their output is a catalogue's message or a formatted value, and
    # message extraction finds ``t`` by its class.
    add_locale_filters(environment)
    return environment


@lru_cache(maxsize=1)
def _environments() -> tuple[Environment, Environment, Environment]:
    return (
        # Undefined variables are an error when rendering a message: a typo must not
        # send "Hello ," to a customer. Except through ``default``, which is how Liquid
        # spells "this field is optional" (plain StrictUndefined fails it as well).
        liquid_environment(undefined=StrictDefaultUndefined),
        liquid_environment(undefined=StrictDefaultUndefined, autoescape=True),
        # A condition over a missing field is simply false (Liquid's usual semantics).
        liquid_environment(),
    )


@lru_cache(maxsize=4096)
def _compile(source: str, html: bool):
    text_env, html_env, _ = _environments()
    return (html_env if html else text_env).from_string(source)


@lru_cache(maxsize=4096)
def _compile_condition(expression: str):
    return _environments()[2].from_string("{% if " + expression + " %}1{% else %}0{% endif %}")


def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith("NOTIFYFLOW_TEMPLATE_"):
        _environments.cache_clear()
        _compile.cache_clear()
        _compile_condition.cache_clear()
        speaks_locale.cache_clear()


setting_changed.connect(_reset, dispatch_uid="notifyflow_template_limits")


# Tags that load another template: there is no template loader, so they could only fail
# at run time.
_LOADING_TAGS = ("include", "render")


def check_template(source: str, *, html: bool = False) -> None:
    """Raise TemplateError if ``source`` does not parse or could never render: an unknown
    filter, or a tag that loads another template."""
    try:
        template = _compile(source, html)
    except LiquidError as exc:
        raise _error(exc) from exc
    _check_names(template)


def check_condition(expression: str) -> None:
    """Raise TemplateError if ``expression`` is not a Liquid expression that parses."""
    if not expression.strip() or "%}" in expression or "{%" in expression:
        raise TemplateError('a condition is a Liquid expression, e.g. payload.plan == "pro"')
    try:
        template = _compile_condition(expression)
    except LiquidError as exc:
        raise _error(exc) from exc
    _check_names(template)


def variable_paths(source: str, *, condition: bool = False) -> list[tuple[str, ...]]:
    """The context variables a template (or condition) reads, each as the leading
    literal segments of its path (``payload.items[0].name`` -> ``("payload", "items")``
    and on; ``vars[payload.k]`` -> ``("vars",)``). Variables it assigns or loops over
    itself are not included. ``source`` must have passed ``check_template`` /
    ``check_condition``."""
    template = _compile_condition(source) if condition else _compile(source, False)
    paths = []
    for variables in template.analyze(include_partials=False).globals.values():
        for variable in variables:
            literal: list[str] = []
            for segment in variable.segments:
                if not isinstance(segment, str):
                    break
                literal.append(segment)
            paths.append(tuple(literal))
    return paths


@lru_cache(maxsize=4096)
def speaks_locale(source: str) -> bool:
    """Whether ``source`` renders differently by locale (``t``, ``datetime``,
    ``currency``, ``decimal``). ``source`` must have passed ``check_template``."""
    filters = _compile(source, False).analyze(include_partials=False).filters
    return not LOCALE_FILTERS.isdisjoint(filters)


def translation_keys(source: str) -> list[str]:
    """The keys ``source`` asks ``t`` for (string literals only). ``source`` must have
    passed ``check_template``."""
    if "t" not in source:
        return []
    return message_keys(_compile(source, False))


def _check_names(template: Any) -> None:
    """What python-liquid only finds when rendering (``UnknownFilterError``, a missing
    template), found from its parse-time analysis instead, so a definition that would fail
    every instance is refused when it is saved."""
    analysis = template.analyze(include_partials=False)
    known = template.env.filters
    for name in analysis.filters:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TemplateError(f"unknown filter {name!r}{hint}")
    for tag in _LOADING_TAGS:
        if tag in analysis.tags:
            raise TemplateError(f"the {tag!r} tag is not available: templates cannot load others")


def render(source: str, context: dict[str, Any], *, html: bool = False) -> str:
    try:
        return _compile(source, html).render(**context)
    except LiquidError as exc:
        raise _error(exc) from exc


def condition_holds(expression: str, context: dict[str, Any]) -> bool:
    try:
        return _compile_condition(expression).render(**context) == "1"
    except LiquidError as exc:
        raise _error(exc) from exc


def _error(exc: LiquidError) -> TemplateError:
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    if isinstance(exc, ResourceLimitError):
        return TemplateLimitError(text)
    return TemplateError(text)
