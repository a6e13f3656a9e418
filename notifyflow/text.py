"""What text may be. Printable: an id or a key the API takes holds no control
character (``printable_problem``). Storable: a JSON value both databases can store
(``check_storable``: no non-finite number, NUL or lone surrogate). The API's fields and
parser apply these; the domain re-checks what reaches it another way (a definition's
links, a recipient id in a path, an operator's edited payload)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ApplicationError

# --- Ids and keys are printable text ------------------------------------------------------
# The one rule for every id and key the API takes - recipient ids (in a body or a path),
# list keys, idempotency keys, workflow keys, event ids: none may hold a C0 or C1
# control character or DEL (NUL, newline, tab, ESC, NEL ...), a line or paragraph
# separator, a lone UTF-16 surrogate, or a bidirectional control (the embeddings,
# overrides, isolates and marks that make text display as other text). Everything else
# - any script, emoji, spaces inside - is fine. As (first, last) code points:
_CONTROLS = ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029))
_BIDI_CONTROLS = ((0x061C, 0x061C), (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069))
_SURROGATES = ((0xD800, 0xDFFF),)


def _class(ranges: Iterable[tuple[int, int]], char: Callable[[int], str]) -> str:
    """A regular expression character class's inside: the ranges, each end by ``char``."""
    return "".join(
        char(first) if first == last else f"{char(first)}-{char(last)}" for first, last in ranges
    )


_NOT_PRINTABLE = re.compile(f"[{_class((*_CONTROLS, *_BIDI_CONTROLS, *_SURROGATES), chr)}]")
_BIDI = re.compile(f"[{_class(_BIDI_CONTROLS, chr)}]")
# The same set, escaped, for the schema's ``pattern`` (ECMAScript; a lone surrogate
# cannot be written there: the parser refuses one in any string). PRINTABLE_PATTERN:
# printable; KEY_PATTERN: printable and not blank (StrictCharField's rule).
_SCHEMA_CLASS = _class((*_CONTROLS, *_BIDI_CONTROLS), lambda point: f"\\u{point:04x}")
PRINTABLE_PATTERN = f"^[^{_SCHEMA_CLASS}]*$"


def key_pattern(excluded: str = "") -> str:
    """The schema's ``pattern`` of a key: printable, not blank, and none of the
    characters ``excluded`` (written as inside a character class)."""
    chars = _SCHEMA_CLASS + excluded
    return f"^[^{chars}]*[^\\s{chars}][^{chars}]*$"


KEY_PATTERN = key_pattern()


def printable(text: str) -> bool:
    """True if ``text`` holds no character ``printable_problem`` refuses (one search)."""
    return _NOT_PRINTABLE.search(text) is None


def printable_problem(text: str) -> tuple[str, str] | None:
    """(code, problem) for the first character no id or key may hold, else None. The
    codes: ``nul_character`` and ``lone_surrogate`` (as the parser names them anywhere
    in a body), ``bidi_control``, ``control_character``."""
    found = _NOT_PRINTABLE.search(text)
    if found is None:
        return None
    char = found.group()
    point = f"U+{ord(char):04X}"
    if char == "\x00":
        return "nul_character", "contains a NUL character (U+0000)"
    if "\ud800" <= char <= "\udfff":
        return "lone_surrogate", f"contains a lone UTF-16 surrogate ({point}, not valid Unicode)"
    if _BIDI.match(char):
        return "bidi_control", f"contains a bidirectional control character ({point})"
    return "control_character", f"contains a control character ({point})"


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
