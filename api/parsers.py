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
from typing import Any

from django.conf import settings
from rest_framework import parsers, renderers
from rest_framework.exceptions import ParseError

from notifyflow.limits import MAX_JSON_DEPTH, json_depth_exceeds
from notifyflow.text import check_storable


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


class JSONParser(parsers.BaseParser):
    """DRF's JSON parser, plus: pathologically deep nesting refused as malformed
    (Python's json raises RecursionError there), and non-finite numbers, NUL characters
    and lone surrogates refused with a 400 naming the field (``check_storable``).

    Not a subclass of DRF's ``JSONParser``: DRF hands one of those Django's
    ``request.body``, which applies DATA_UPLOAD_MAX_MEMORY_SIZE - the limit of the
    console's forms - and cut a 400 KB bulk body (its own limit 16 MiB) with an opaque
    400. This one reads the request's stream, whose size the view has checked against
    its own limit before (``api.base.ApiView.body_limit``; 413 above it)."""

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
