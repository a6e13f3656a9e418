"""A small, safe evaluator for CUSTOM_EXPRESSION keys of the ``#{...}`` form.

Grammar (whitespace allowed inside ``#{ }``)::

    template    := (text | "#{" expr "}")*
    expr        := "triggerId" | "eventName" | "eventId" | "ctx" accessor*
    accessor    := "." identifier | "[" string "]" | "[" integer "]"
    string      := '...' | "..."      (backslash escapes the next character)

Text outside placeholders is copied as is (a ``#`` not followed by ``{`` is text).
``ctx['a']['b']``, ``ctx.a.b`` and ``ctx["a"]`` read mapping keys; ``[0]`` also indexes
a list. Nothing else exists: no calls, operators or attribute access, and nothing is
ever passed to ``eval``. Every failure, at parse or at evaluation time, is an
ExpressionError; the evaluator raises nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .values import MISSING_TEXT, UnrenderableValueError, render_value

VARIABLES = ("triggerId", "eventName", "eventId", "ctx")
_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT_CHARS = _IDENT_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_MAX_INDEX_DIGITS = 9


class ExpressionError(Exception):
    """An expression that does not parse, or cannot be evaluated against a context."""


class MissingValueError(ExpressionError):
    """A referenced value is absent (raised only when missing values must fail)."""

    def __init__(self, message: str, source: str) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True)
class Placeholder:
    variable: str
    path: tuple[str | int, ...]
    source: str  # the text between the braces, for error messages


@dataclass(frozen=True)
class Template:
    parts: tuple[str | Placeholder, ...]

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(p for p in self.parts if isinstance(p, Placeholder))

    def render(
        self,
        *,
        trigger_id: Any,
        event_name: Any,
        event_id: Any,
        context: Any,
        fail_on_missing: bool = False,
    ) -> str:
        """The rendered key. A missing value renders as ``null``, or raises
        MissingValueError when ``fail_on_missing``. Raises ExpressionError when a value
        cannot be indexed or rendered, or when the result is empty."""
        roots = {
            "triggerId": trigger_id,
            "eventName": event_name,
            "eventId": event_id,
            "ctx": context,
        }
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            found, value = _resolve(roots[part.variable], part)
            if not found:
                if fail_on_missing:
                    raise MissingValueError(f"#{{{part.source}}} is missing", part.source)
                out.append(MISSING_TEXT)
                continue
            try:
                out.append(render_value(value))
            except UnrenderableValueError as exc:
                raise ExpressionError(f"#{{{part.source}}}: {exc}") from exc
        result = "".join(out)
        if not result.strip():
            raise ExpressionError("the expression produced an empty key")
        return result


def _resolve(value: Any, placeholder: Placeholder) -> tuple[bool, Any]:
    if value is None:
        return False, None
    for step in placeholder.path:
        if isinstance(value, Mapping):
            try:
                if step in value:
                    value = value[step]
                elif isinstance(step, int) and str(step) in value:
                    value = value[str(step)]
                else:
                    return False, None
            except TypeError as exc:  # an exotic mapping refusing the key type
                raise ExpressionError(f"#{{{placeholder.source}}}: {exc}") from exc
        elif (
            isinstance(value, Sequence)
            and not isinstance(value, (str, bytes))
            and isinstance(step, int)
        ):
            if not -len(value) <= step < len(value):
                return False, None
            value = value[step]
        else:
            kind = "text" if isinstance(value, str) else type(value).__name__
            raise ExpressionError(
                f"#{{{placeholder.source}}}: cannot read {step!r} from a {kind} value"
            )
        if value is None:
            return False, None
    return True, value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def error(self, message: str) -> ExpressionError:
        return ExpressionError(f"{message} at position {self.pos}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def identifier(self) -> str:
        start = self.pos
        if self.peek() not in _IDENT_START or not self.peek():
            raise self.error("expected a name")
        while self.peek() and self.peek() in _IDENT_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def string(self) -> str:
        quote = self.peek()
        self.pos += 1
        chars: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise self.error("unterminated string")
            self.pos += 1
            if char == quote:
                return "".join(chars)
            if char == "\\":
                escaped = self.peek()
                if not escaped:
                    raise self.error("unterminated string")
                self.pos += 1
                chars.append(escaped)
            else:
                chars.append(char)

    def integer(self) -> int:
        start = self.pos
        if self.peek() == "-":
            self.pos += 1
        while self.peek() and self.peek() in _DIGITS:
            self.pos += 1
        digits = self.text[start : self.pos].lstrip("-")
        if not digits:
            raise self.error("expected a quoted key or an integer index")
        if len(digits) > _MAX_INDEX_DIGITS:
            raise self.error("index too large")
        return int(self.text[start : self.pos])

    def placeholder(self) -> Placeholder:
        start = self.pos  # just after "#{"
        self.skip_spaces()
        name_at = self.pos
        variable = self.identifier()
        if variable not in VARIABLES:
            self.pos = name_at
            raise self.error(f"unknown variable {variable!r} (use {', '.join(VARIABLES)})")
        path: list[str | int] = []
        while True:
            self.skip_spaces()
            char = self.peek()
            if char == "}":
                source = self.text[start : self.pos].strip()
                self.pos += 1
                return Placeholder(variable, tuple(path), source)
            if char not in (".", "["):
                if not char:
                    raise self.error("unterminated #{ (missing '}')")
                raise self.error(f"unexpected {char!r}")
            if variable != "ctx":
                raise self.error(f"only ctx can be indexed, not {variable}")
            self.pos += 1
            self.skip_spaces()
            if char == ".":
                path.append(self.identifier())
                continue
            if self.peek() in ("'", '"'):
                path.append(self.string())
            else:
                path.append(self.integer())
            self.skip_spaces()
            if self.peek() != "]":
                raise self.error("expected ']'")
            self.pos += 1

    def template(self) -> Template:
        parts: list[str | Placeholder] = []
        text: list[str] = []
        while self.pos < len(self.text):
            if self.text.startswith("#{", self.pos):
                if text:
                    parts.append("".join(text))
                    text = []
                self.pos += 2
                parts.append(self.placeholder())
            else:
                text.append(self.text[self.pos])
                self.pos += 1
        if text:
            parts.append("".join(text))
        return Template(tuple(parts))


def parse_template(text: Any) -> Template:
    """Parse a ``#{...}`` template. Raises ExpressionError (never anything else)."""
    if not isinstance(text, str):
        raise ExpressionError("the expression must be a string")
    return _Parser(text).template()
