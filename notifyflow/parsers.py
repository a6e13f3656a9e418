"""The API's one JSON parser: what it accepts is what both databases can store.

Python's json module reads ``1e999`` as infinity and ``NaN``/``Infinity`` as floats;
PostgreSQL's jsonb and SQLite's JSON1 reject them (a 500 at the INSERT), a NUL
character is refused by PostgreSQL's jsonb but silently kept by SQLite, and a lone UTF-16
surrogate (``"\ud800"``: valid JSON, not valid Unicode) cannot be encoded as UTF-8 by any
driver. So every body is checked here, once, before any view sees it: a 400 naming the
field, on every endpoint.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import Any

from django.conf import settings
from rest_framework import parsers, renderers
from rest_framework.exceptions import ParseError

from .errors import ApplicationError
from .limits import MAX_JSON_DEPTH, json_depth_exceeds


class _NonFinite(float):
    """A parsed NaN, Infinity or out-of-range number, kept until the walk names its field."""

    text: str

    def __new__(cls, text: str) -> _NonFinite:
        value = super().__new__(cls, "nan")
        value.text = text
        return value


def _parse_float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


# After json.loads a valid pair (\ud83d\ude00) is one character: any surrogate left is lone.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str) -> tuple[str, str] | None:
    """(code, problem) for a string no database can store, else None."""
    if "\x00" in text:
        return "nul_character", "contains a NUL character"
    if not text.isascii() and _SURROGATE.search(text):
        return "lone_surrogate", "contains a lone UTF-16 surrogate (not valid Unicode)"
    return None


def text_storable(text: str) -> bool:
    """True if ``check_storable`` passes the string ``text`` (as a value or a key)."""
    return _text_problem(text) is None


# All that ``json.dumps`` (ensure_ascii) writes for a value ``check_storable`` refuses:
# a non-finite number (a parsed NaN, Infinity or 1e999 is kept as a NaN), a NUL
# (\u0000), a surrogate (\ud800-\udfff; a valid pair is written as two, a false alarm).
_MAYBE_UNSTORABLE = re.compile(r"NaN|Infinity|\\u(?:0000|d[89a-f])")


def dumped_storable(dumped: str) -> bool:
    """True if ``dumped`` - ``json.dumps`` (ensure_ascii, any separators) of a parsed JSON
    value - shows that ``check_storable`` passes that value; False means maybe not (a
    string that contains "NaN" is a false alarm): ask ``check_storable``. One regular
    expression over the C encoder's output instead of a Python walk of every value."""
    return _MAYBE_UNSTORABLE.search(dumped) is None


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def check_storable(value: Any, path: str = "") -> None:
    """Raise ApplicationError (400) naming the first non-finite number, NUL character or
    lone surrogate in ``value`` (a parsed JSON document), keys included. Iterative:
    nesting depth is bounded by the parser, not by this walk."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                problem = _text_problem(key)
                if problem is not None:
                    # The key cannot be shown as the field either: name its parent.
                    _refuse(where or "body", problem[0], f"a key {problem[1]}")
                stack.append((_path(where, key), child))
        elif isinstance(item, list):
            stack.extend((_path(where, index), child) for index, child in enumerate(item))
        elif isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                _refuse(where or "body", *problem)
        elif isinstance(item, float) and not math.isfinite(item):
            text = getattr(item, "text", repr(item))
            _refuse(
                where or "body",
                "invalid_number",
                f"{text} is not a finite number (out of range, NaN or Infinity)",
            )


def _refuse(field: str, code: str, problem: str) -> None:
    raise ApplicationError(code=code, field=field, message=f"{field}: {problem}")


class JSONParser(parsers.BaseParser):
    """DRF's JSON parser, plus: pathologically deep nesting refused as malformed
    (Python's json raises RecursionError there), and non-finite numbers, NUL characters
    and lone surrogates refused with a 400 naming the field (``check_storable``).

    Not a subclass of DRF's ``JSONParser``: DRF hands one of those Django's
    ``request.body``, which applies DATA_UPLOAD_MAX_MEMORY_SIZE - the limit of the
    console's forms - and cut a 400 KB bulk body (its own limit 16 MiB) with an opaque
    400. This one reads the request's stream, whose size the view has checked against
    its own limit before (``notifyflow.api.ApiView.body_limit``; 413 above it)."""

    media_type = "application/json"
    renderer_class = renderers.JSONRenderer
    check_values = True

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            decoded = codecs.getreader(encoding)(stream)
            data = json.load(decoded, parse_float=_parse_float, parse_constant=_NonFinite)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        check_depth(data)
        if self.check_values:
            check_storable(data)
        return data


class PartsCheckedJSONParser(JSONParser):
    """``JSONParser`` for a view that calls ``check_storable`` on each part of the body
    itself (a bulk request: one bad item must not reject the others)."""

    check_values = False


def check_depth(data: Any) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH (400), so nothing accepted can break
    a later page (the admin's pretty-printer, copies, templates) with recursion."""
    if json_depth_exceeds(data, MAX_JSON_DEPTH):
        raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep")
