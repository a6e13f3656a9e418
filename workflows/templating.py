"""Liquid templates: one strict environment for rendering, one lenient one for conditions.

Compiled templates are cached by source text, so a worker parses each template once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from liquid import Environment, StrictUndefined
from liquid.exceptions import LiquidError

# Undefined variables are an error when rendering a message: a typo must not send
# "Hello ," to a customer.
_text_env = Environment(undefined=StrictUndefined)
_html_env = Environment(undefined=StrictUndefined, autoescape=True)
# A condition over a missing field is simply false (Liquid's usual semantics).
_condition_env = Environment()


class TemplateError(Exception):
    """A template failed to parse or render; ``str()`` says where."""


@lru_cache(maxsize=4096)
def _compile(source: str, html: bool):
    env = _html_env if html else _text_env
    return env.from_string(source)


@lru_cache(maxsize=4096)
def _compile_condition(expression: str):
    return _condition_env.from_string("{% if " + expression + " %}1{% else %}0{% endif %}")


def check_template(source: str, *, html: bool = False) -> None:
    """Raise TemplateError if ``source`` does not parse."""
    try:
        _compile(source, html)
    except LiquidError as exc:
        raise TemplateError(_first_line(exc)) from exc


def check_condition(expression: str) -> None:
    if not expression.strip() or "%}" in expression or "{%" in expression:
        raise TemplateError('a condition is a Liquid expression, e.g. payload.plan == "pro"')
    try:
        _compile_condition(expression)
    except LiquidError as exc:
        raise TemplateError(_first_line(exc)) from exc


def render(source: str, context: dict[str, Any], *, html: bool = False) -> str:
    try:
        return _compile(source, html).render(**context)
    except LiquidError as exc:
        raise TemplateError(_first_line(exc)) from exc


def condition_holds(expression: str, context: dict[str, Any]) -> bool:
    try:
        return _compile_condition(expression).render(**context) == "1"
    except LiquidError as exc:
        raise TemplateError(_first_line(exc)) from exc


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
